"""A new rule as a contributor adds one: a module of its own (in a package of its own, outside the product) with
its alert declared at its end, and one line added to the registry. Real code, imported from disk."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from spark_state_observer.metrics import catalog
from spark_state_observer.model.alert_spec import AlertSpec
from spark_state_observer.signals import registry

NAME = "SparkStreamingThrowawayRaised"
MODULE = '''
    """A rule that marks a query whose batch takes longer than its trigger (a throwaway, for the tests)."""

    from spark_state_observer.model.alert_spec import WARNING, AlertSpec
    from spark_state_observer.signals.rule import Context, Rule


    class Throwaway(Rule):
        def on_batch(self, ctx: Context) -> None:
            return None


    ALERTS = (
        AlertSpec(
            "{name}",
            "queries",
            "2m",
            WARNING,
            verdicts=("throwaway",),
            summary="The throwaway rule marked the query.",
            verdict_text=(("throwaway", "Throwaway: {{operator}} partition {{partition}}"),),
            flag="{flag}",
            description="The throwaway rule's gauge is 1 for this query.",
        ),
    )
    Throwaway.alerts = ALERTS
'''


def register(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AlertSpec:
    """Write the throwaway package under ``tmp_path``, import it, add its line to the registry (undone after the
    test by ``monkeypatch``); its alert's declaration."""
    package = tmp_path / "throwaway_rules"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    flag = catalog.QUERY_STALLED.prometheus_name  # any per-query 0/1 gauge of the catalog
    (package / "gauge.py").write_text(textwrap.dedent(MODULE.format(name=NAME, flag=flag)))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("throwaway_rules", "throwaway_rules.gauge"):  # another test's package, at another path
        monkeypatch.delitem(sys.modules, name, raising=False)
    importlib.invalidate_caches()
    module = importlib.import_module("throwaway_rules.gauge")
    monkeypatch.setattr(registry, "RULES", (*registry.RULES, ("throwaway", module.Throwaway, lambda n: module.Throwaway())))
    return module.ALERTS[0]
