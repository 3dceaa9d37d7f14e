"""Panel factories with the house style: units, thresholds and a "what bad looks like" description on
every panel, the Prometheus datasource variable, and legends as tables with last / max.

Keeping the style in one module makes the four dashboards consistent and makes it impossible to add a
panel without a unit, thresholds or a description (they are required arguments).
"""

from __future__ import annotations

from typing import Sequence

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus, stat, table, timeseries
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as pm

from dashboards.promql import sel

DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
ROWS_PER_SECOND = "si:rows/s"
Target = tuple[str, str]  # (PromQL expression, legend)
Steps = Sequence[tuple[float | None, str]]  # (lower bound, colour); the first bound is None


def thresholds(steps: Steps) -> db.ThresholdsConfig:
    return db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps([dm.Threshold(value=v, color=c) for v, c in steps])


def _targets(targets: Sequence[Target], instant: bool = False, table_format: bool = False) -> list[prometheus.Dataquery]:
    out = []
    for i, (expr, legend) in enumerate(targets):
        q = prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(chr(ord("A") + i)).datasource(DATASOURCE)
        if instant:
            q = q.instant()
        else:
            q = q.range()
        if table_format:
            q = q.format(pm.PromQueryFormat.TABLE)
        out.append(q)
    return out


def ts(title: str, description: str, targets: Sequence[Target], unit: str, steps: Steps, *, span: int = 12,
       stack: bool = False, bars: bool = False, show_thresholds: bool = False, minimum: float | None = 0) -> timeseries.Panel:
    """A time series panel; ``show_thresholds`` draws the thresholds as dashed lines (alert levels)."""
    p = (timeseries.Panel().title(title).description(description).datasource(DATASOURCE).unit(unit).thresholds(thresholds(steps))
         .targets(_targets(targets)).span(span).height(8).line_width(1).fill_opacity(25 if stack else 10)
         .gradient_mode(cm.GraphGradientMode.OPACITY).show_points(cm.VisibilityMode.NEVER).span_nulls(True)
         .legend(cb.VizLegendOptions().show_legend(True).display_mode(cm.LegendDisplayMode.TABLE)
                 .placement(cm.LegendPlacement.BOTTOM).calcs(["lastNotNull", "max"]))
         .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.DESCENDING)))
    if minimum is not None:
        p = p.min(minimum)
    if stack:
        p = p.stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL))
    if bars:
        p = p.draw_style(cm.GraphDrawStyle.BARS).fill_opacity(80)
    if show_thresholds:
        p = p.thresholds_style(cb.GraphThresholdsStyleConfig().mode(cm.GraphThresholdsStyleMode.DASHED))
    return p


def stat_panel(title: str, description: str, targets: Sequence[Target], unit: str, steps: Steps, *, span: int = 4) -> stat.Panel:
    """A single-number panel coloured by its thresholds (background), from instant queries."""
    return (stat.Panel().title(title).description(description).datasource(DATASOURCE).unit(unit).thresholds(thresholds(steps))
            .targets(_targets(targets, instant=True)).span(span).height(4)
            .color_mode(cm.BigValueColorMode.BACKGROUND).graph_mode(cm.BigValueGraphMode.NONE)
            .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False)))


def table_panel(title: str, description: str, targets: Sequence[Target], unit: str, steps: Steps, *, span: int = 24) -> table.Panel:
    """A table of instant values, one row per series, labels as columns (merged across targets)."""
    return (table.Panel().title(title).description(description).datasource(DATASOURCE).unit(unit).thresholds(thresholds(steps))
            .targets(_targets(targets, instant=True, table_format=True)).span(span).height(7)
            .with_transformation(dm.DataTransformerConfig(id_val="merge", options={}))
            .with_transformation(dm.DataTransformerConfig(id_val="organize", options={"excludeByName": {"Time": True, "__name__": True}})))


def variables(with_operator: bool = True) -> list[db.QueryVariable | db.DatasourceVariable]:
    """$datasource, $query (label ``query``) and, on per-operator dashboards, $operator."""
    out: list[db.QueryVariable | db.DatasourceVariable] = [
        db.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        db.QueryVariable("query").label("Query").datasource(DATASOURCE)
        .query("label_values(spark_streaming_query_info, query)")
        .definition("label_values(spark_streaming_query_info, query)")
        .multi(True).include_all(True).all_value(".*").refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dm.VariableSort.ALPHABETICAL_ASC),
    ]
    if with_operator:
        expr = 'label_values(spark_state_operator_info{query=~"$query"}, operator)'
        out.append(db.QueryVariable("operator").label("Operator").datasource(DATASOURCE)
                   .query(expr).definition(expr)
                   .multi(True).include_all(True).all_value(".*").refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
                   .sort(dm.VariableSort.ALPHABETICAL_ASC))
    return out


TAG = "spark-state-observer"


def restarts_annotation() -> db.AnnotationQuery:
    """A mark at every new run of a query: a run id that was not there one interval earlier."""
    info = sel("spark_streaming_query_info")
    return (db.AnnotationQuery().name("Query (re)starts").datasource(DATASOURCE).enable(True).icon_color("orange")
            .expr(f"{info} unless {info} offset $__interval").step("$__interval")
            .title_format("{{query}} started").text_format("run {{run_id}}"))


def dashboard(uid: str, title: str, description: str, with_operator: bool = True) -> db.Dashboard:
    """A dashboard shell: variables, links to its siblings (by tag), time range and refresh."""
    return (db.Dashboard(title).uid(uid).description(description).tags([TAG, "spark", "streaming"]).editable()
            .time("now-3h", "now").refresh("30s").timezone("browser").tooltip(dm.DashboardCursorSync.CROSSHAIR)
            .variables(variables(with_operator)).annotation(restarts_annotation())
            .link(db.DashboardLink("Spark state").type(dm.DashboardLinkType.DASHBOARDS).tags([TAG]).as_dropdown(True)
                  .include_vars(True).keep_time(True)))


def row(title: str) -> db.Row:
    return db.Row(title)
