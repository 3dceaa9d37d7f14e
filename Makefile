# Tasks: make test | test-fast | test-unit | test-integration | test-e2e | lint | format | typecheck | generate | check-generated
PYTHON ?= python
GENERATED = README.md docs/reference.md dashboards alerts deploy/prometheus-operator deploy/grafana spark_state_observer/mixin/bundled spark_state_observer/browser/static

.PHONY: test test-fast test-unit test-integration test-e2e lint format typecheck generate check-generated

test:  ## the whole suite: end-to-end on real Spark, Prometheus and Chromium included
	$(PYTHON) -m pytest

test-fast:  ## the tests not marked slow, in every folder (a few use promtool or PostgreSQL)
	$(PYTHON) -m pytest -m "not slow"

test-unit:  ## tests/unit: no Spark, no external server
	$(PYTHON) -m pytest tests/unit

test-integration:  ## tests/integration: real Prometheus, promtool, PostgreSQL, Kafka, s3proxy, Chromium, buildah ...
	$(PYTHON) -m pytest tests/integration

test-e2e:  ## tests/e2e: real Spark
	$(PYTHON) -m pytest tests/e2e

lint:  ## ruff, and the import contract (packages follow the flow: [tool.importlinter] in pyproject.toml)
	ruff check .
	ruff format --check .
	lint-imports

format:
	ruff format .
	ruff check --fix .

typecheck:  ## strict on the package (see [tool.mypy] in pyproject.toml)
	mypy

generate:  ## README summaries, docs/reference.md tables and the mixin's default export (dashboards, rules, their tests, runbook, deploy objects)
	$(PYTHON) scripts/update_readme.py
	$(PYTHON) scripts/update_mixin.py

check-generated: generate  ## fails when a committed generated file differs from what the code generates
	git diff --exit-code -- $(GENERATED)
