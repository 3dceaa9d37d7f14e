"""Panel factories with the house style: units, thresholds and a "what bad looks like" description on
every panel, the Prometheus datasource variable, one variable per identity label, and legends as
tables with last / max.

Keeping the style in one module makes the four dashboards consistent and makes it impossible to add a
panel without a unit, thresholds or a description (they are required arguments). Needs
grafana-foundation-sdk (the ``mixin`` extra); nothing outside ``spark_state_observer.mixin.dashboards`` imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus, stat, table, timeseries
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as pm

from spark_state_observer.metrics import catalog
from spark_state_observer.mixin.config import MixinConfig, Thresholds
from spark_state_observer.mixin.promql import PromQL, metric

DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
ROWS_PER_SECOND = "si:rows/s"
OK, WARN, BAD = "green", "orange", "red"
TAG = "spark-state-observer"
NONE_REPORTED = "None reported for the selected queries in this range"
"""What an empty panel means unless the panel says more (``no_value``): Grafana's bare "No data" reads as
a broken panel, while an empty result here is a true answer (no query of the selection has this series)."""
KAFKA_NONE = "No Kafka source in the selected queries"
"""The Kafka panels' empty answer: their series exist only for Kafka sources (lag in records also needs maxOffsetsPerTrigger)."""
Target = tuple[str, str]  # (PromQL expression, legend)
Steps = Sequence[tuple[float | None, str]]  # (lower bound, colour); the first bound is None


@dataclass(frozen=True)
class Context:
    """What a dashboard builder needs: the configuration, its PromQL helpers and its thresholds."""

    config: MixinConfig
    p: PromQL
    t: Thresholds

    @classmethod
    def of(cls, config: MixinConfig) -> Context:
        return cls(config, PromQL(config, dashboard=True), config.thresholds)

    def legend(self, text: str) -> str:
        """Legends name the application before the query: two apps may run queries of the same name."""
        return text.replace("{{query}}", "{{" + self.config.app_label + "}} / {{query}}")


def thresholds(steps: Steps) -> db.ThresholdsConfig:
    return db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps([dm.Threshold(value=v, color=c) for v, c in steps])


def _targets(ctx: Context, targets: Sequence[Target], instant: bool = False, table_format: bool = False) -> list[Any]:
    out = []
    for i, (expr, legend) in enumerate(targets):
        q = prometheus.Dataquery().expr(expr).legend_format(ctx.legend(legend)).ref_id(chr(ord("A") + i)).datasource(DATASOURCE)
        q = q.instant() if instant else q.range()
        if table_format:
            q = q.format(pm.PromQueryFormat.TABLE)
        out.append(q)
    return out


def ts(
    ctx: Context,
    title: str,
    description: str,
    targets: Sequence[Target],
    unit: str,
    steps: Steps,
    *,
    span: int = 12,
    stack: bool = False,
    bars: bool = False,
    show_thresholds: bool = False,
    minimum: float | None = 0,
    no_value: str = NONE_REPORTED,
) -> timeseries.Panel:
    """A time series panel; ``show_thresholds`` draws the thresholds as dashed lines (alert levels);
    ``no_value`` what an empty result means."""
    p = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .no_value(no_value)
        .datasource(DATASOURCE)
        .unit(unit)
        .thresholds(thresholds(steps))
        .targets(_targets(ctx, targets))
        .span(span)
        .height(8)
        .line_width(1)
        .fill_opacity(25 if stack else 10)
        .gradient_mode(cm.GraphGradientMode.OPACITY)
        .show_points(cm.VisibilityMode.NEVER)
        .span_nulls(True)
        .legend(
            cb.VizLegendOptions()
            .show_legend(True)
            .display_mode(cm.LegendDisplayMode.TABLE)
            .placement(cm.LegendPlacement.BOTTOM)
            .calcs(["lastNotNull", "max"])
        )
        .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.DESCENDING))
    )
    if minimum is not None:
        p = p.min(minimum)
    if stack:
        p = p.stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL))
    if bars:
        p = p.draw_style(cm.GraphDrawStyle.BARS).fill_opacity(80)
    if show_thresholds:
        p = p.thresholds_style(cb.GraphThresholdsStyleConfig().mode(cm.GraphThresholdsStyleMode.DASHED))
    return p


def stat_panel(
    ctx: Context,
    title: str,
    description: str,
    targets: Sequence[Target],
    unit: str,
    steps: Steps,
    *,
    span: int = 4,
    no_value: str = NONE_REPORTED,
) -> stat.Panel:
    """A single-number panel coloured by its thresholds (background), from instant queries."""
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .no_value(no_value)
        .datasource(DATASOURCE)
        .unit(unit)
        .thresholds(thresholds(steps))
        .targets(_targets(ctx, targets, instant=True))
        .span(span)
        .height(4)
        .color_mode(cm.BigValueColorMode.BACKGROUND)
        .graph_mode(cm.BigValueGraphMode.NONE)
        .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    )


def table_panel(
    ctx: Context,
    title: str,
    description: str,
    targets: Sequence[Target],
    unit: str,
    steps: Steps,
    *,
    span: int = 24,
    no_value: str = NONE_REPORTED,
) -> table.Panel:
    """A table of instant values, one row per series, labels as columns (merged across targets)."""
    return (
        table.Panel()
        .title(title)
        .description(description)
        .no_value(no_value)
        .datasource(DATASOURCE)
        .unit(unit)
        .thresholds(thresholds(steps))
        .targets(_targets(ctx, targets, instant=True, table_format=True))
        .span(span)
        .height(7)
        .with_transformation(dm.DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(dm.DataTransformerConfig(id_val="organize", options={"excludeByName": {"Time": True, "__name__": True}}))
    )


def _query_variable(name: str, label: str, expr: str) -> db.QueryVariable:
    return (
        db.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query(expr)
        .definition(expr)
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dm.VariableSort.ALPHABETICAL_ASC)
    )


def variables(ctx: Context, with_operator: bool = True) -> list[Any]:
    """$datasource, one variable per identity label (each filtered by the ones before it), $query and,
    on per-operator dashboards, $operator; all read from the info metrics the observer exports."""
    config = ctx.config
    source = config.datasource
    out: list[Any] = [
        db.DatasourceVariable("datasource")
        .label("Data source")
        .type("prometheus")
        .current(dm.VariableOption(selected=True, text=source.name, value=source.uid)),
    ]
    matchers = [config.selector.strip()] if config.selector.strip() else []
    for label in config.identity_labels:
        info = metric(catalog.QUERY_INFO) + (f"{{{', '.join(matchers)}}}" if matchers else "")
        out.append(_query_variable(label, label.replace("_", " ").capitalize(), f"label_values({info}, {label})"))
        matchers.append(f'{label}=~"${label}"')
    out.append(_query_variable("query", "Query", f"label_values({metric(catalog.QUERY_INFO)}{{{', '.join(matchers)}}}, query)"))
    if with_operator:
        matchers.append('query=~"$query"')
        out.append(
            _query_variable("operator", "Operator", f"label_values({metric(catalog.OPERATOR_INFO)}{{{', '.join(matchers)}}}, operator)")
        )
    return out


def restarts_annotation(ctx: Context) -> db.AnnotationQuery:
    """A mark at every new run of a query: a run id that was not there one interval earlier."""
    info = ctx.p.sel(catalog.QUERY_INFO)
    return (
        db.AnnotationQuery()
        .name("Query (re)starts")
        .datasource(DATASOURCE)
        .enable(True)
        .icon_color("orange")
        .expr(f"{info} unless {info} offset $__interval")
        .step("$__interval")
        .title_format(ctx.legend("{{query}} started"))
        .text_format("run {{run_id}}")
    )


def dashboard(ctx: Context, uid: str, title: str, description: str, with_operator: bool = True) -> db.Dashboard:
    """A dashboard shell: variables, links to its siblings (by tag), time range and refresh."""
    return (
        db.Dashboard(title)
        .uid(f"{ctx.config.dashboard_uid_prefix}-{uid}")
        .description(description)
        .tags([TAG, "spark", "streaming"])
        .editable()
        .time("now-3h", "now")
        .refresh(ctx.config.dashboard_refresh)
        .timezone("browser")
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .variables(variables(ctx, with_operator))
        .annotation(restarts_annotation(ctx))
        .link(
            db.DashboardLink("Spark state")
            .type(dm.DashboardLinkType.DASHBOARDS)
            .tags([TAG])
            .as_dropdown(True)
            .include_vars(True)
            .keep_time(True)
        )
    )


def row(title: str) -> db.Row:
    return db.Row(title)
