"""A new rule and its alert, added as one module and one registry line, export an alert that promtool loads and
whose generated unit test passes (real promtool)."""

from __future__ import annotations

import glob
import os
import subprocess

import pytest
from support import throwaway_rule

from conftest import need
from spark_state_observer.mixin.config import load_config
from spark_state_observer.mixin.export import artefacts, write


def test_a_new_rules_alert_passes_promtool(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = throwaway_rule.register(tmp_path / "code", monkeypatch)
    files = {k: v for k, v in artefacts(load_config(None, [])).items() if k.startswith("alerts/")}
    assert spec.name in files["alerts/rules.yml"] and spec.name in files["alerts/tests/queries.yml"]
    write(str(tmp_path / "out"), files)
    alerts = str(tmp_path / "out" / "alerts")
    tests = sorted(glob.glob(os.path.join(alerts, "tests", "*.yml")))
    for args in (("check", "rules", "rules.yml", "recording.yml"), ("test", "rules", *tests)):
        done = subprocess.run([need("promtool"), *args], capture_output=True, text=True, cwd=alerts, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
