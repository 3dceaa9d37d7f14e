"""The dashboards in Grafana's v2 schema (``dashboard.grafana.app/v2``, stable since Grafana 13), built with
grafana-foundation-sdk's ``dashboardv2`` builders from the classic dashboards the panel modules build.

One source of panels: every classic panel becomes a v2 element with the same title, description, queries,
options and field config (units, thresholds, no-value text), placed in a rows layout whose rows are the
classic rows and whose grid keeps each panel's size and place; variables, annotations, links, time range and
refresh carry over. So the v2 and the classic dashboards show the same panels, and the same test runs every
query of both against a real Prometheus.
"""

from __future__ import annotations

from typing import Any

from grafana_foundation_sdk.builders import dashboardv2 as b
from grafana_foundation_sdk.builders import prometheus
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.models import dashboardv2 as m
from grafana_foundation_sdk.models import prometheus as pm

API_VERSION = "dashboard.grafana.app/v2"
CURSOR_SYNC = {0: m.DashboardCursorSync.OFF, 1: m.DashboardCursorSync.CROSSHAIR, 2: m.DashboardCursorSync.TOOLTIP}


class _VariableQuery(cogbuilder.Builder[m.DataQueryKind]):
    """A Prometheus variable query (``label_values(...)``) in the form Grafana keeps a classic string query."""

    def __init__(self, query: str) -> None:
        self._query = query

    def build(self) -> m.DataQueryKind:
        return m.DataQueryKind(group="prometheus", spec={"__legacyStringValue": self._query})


def _datasource(classic: dict[str, Any] | None) -> b.Dashboardv2DataQueryKindDatasource:
    return b.Dashboardv2DataQueryKindDatasource().name(str((classic or {}).get("uid") or "${datasource}"))


def _target(t: dict[str, Any], datasource: dict[str, Any] | None) -> b.Target:
    query = prometheus.QueryV2().datasource(_datasource(t.get("datasource") or datasource)).expr(t["expr"])
    if t.get("legendFormat") is not None:
        query = query.legend_format(t["legendFormat"])
    if t.get("instant"):
        query = query.instant(True).range(False)
    elif t.get("range") is not None:
        query = query.range(bool(t["range"]))
    if t.get("format"):
        query = query.format(pm.PromQueryFormat(t["format"]))
    if t.get("interval"):
        query = query.interval(t["interval"])
    return b.Target().ref_id(t["refId"]).query(query)


def _panel(p: dict[str, Any]) -> b.Panel:
    viz = (
        b.VizConfigKind()
        .group(p["type"])
        .version(str(p.get("pluginVersion") or ""))
        .options(p.get("options") or {})
        .field_config(m.FieldConfigSource.from_json(p.get("fieldConfig") or {"defaults": {}, "overrides": []}))
    )
    data = b.QueryGroup().targets([_target(t, p.get("datasource")) for t in p.get("targets") or []])
    if p.get("interval") or p.get("maxDataPoints"):
        options = b.QueryOptionsSpec()
        if p.get("interval"):
            options = options.interval(p["interval"])
        if p.get("maxDataPoints"):
            options = options.max_data_points(int(p["maxDataPoints"]))
        data = data.query_options(options)
    panel = b.Panel().id(float(p["id"])).title(p.get("title") or "").description(p.get("description") or "").data(data).visualization(viz)
    return panel.transparent(bool(p.get("transparent")))


def _grid_item(name: str, pos: dict[str, Any], top: int) -> b.GridItem:
    return b.GridItem().name(name).x(int(pos["x"])).y(int(pos["y"]) - top).width(int(pos["w"])).height(int(pos["h"]))


def _variable(v: dict[str, Any]) -> Any:
    current = v.get("current") or {}
    option = m.VariableOption(text=current.get("text", ""), value=current.get("value", ""))
    if v["type"] == "datasource":
        return (
            b.DatasourceVariable(v["name"])
            .label(v.get("label") or v["name"])
            .plugin_id(v.get("query") or "prometheus")
            .current(option)
            .multi(bool(v.get("multi")))
            .include_all(bool(v.get("includeAll")))
        )
    if v["type"] != "query":
        raise ValueError(f"no v2 form for a {v['type']} variable ({v['name']})")
    query = v["query"] if isinstance(v["query"], str) else v["query"].get("query", "")
    variable = (
        b.QueryVariable(v["name"])
        .label(v.get("label") or v["name"])
        .query(_VariableQuery(query))
        .definition(v.get("definition") or query)
        .current(option)
        .multi(bool(v.get("multi")))
        .include_all(bool(v.get("includeAll")))
        .refresh(m.VariableRefresh.ON_TIME_RANGE_CHANGED if v.get("refresh") == 2 else m.VariableRefresh.ON_DASHBOARD_LOAD)
        .sort(m.VariableSort.ALPHABETICAL_ASC if v.get("sort") == 1 else m.VariableSort.DISABLED)
        .allow_custom_value(bool(v.get("allowCustomValue", True)))
    )
    if v.get("allValue") is not None:
        variable = variable.all_value(v["allValue"])
    if v.get("regex"):
        variable = variable.regex(v["regex"])
    return variable


class _AnnotationQuery(cogbuilder.Builder[m.DataQueryKind]):
    """The annotation's Prometheus query with the fields a Prometheus annotation reads (step, title and text)."""

    def __init__(self, a: dict[str, Any]) -> None:
        self._a = a

    def build(self) -> m.DataQueryKind:
        keys = ("expr", "step", "titleFormat", "textFormat", "tagKeys", "useValueForTime")
        spec = {k: self._a[k] for k in keys if k in self._a}
        return m.DataQueryKind(group="prometheus", datasource=_datasource(self._a.get("datasource")).build(), spec=spec)


def _annotation(a: dict[str, Any]) -> b.AnnotationQuery:
    return (
        b.AnnotationQuery()
        .name(a["name"])
        .enable(bool(a.get("enable", True)))
        .hide(bool(a.get("hide", False)))
        .icon_color(a.get("iconColor") or "orange")
        .query(_AnnotationQuery(a))
    )


def _link(link: dict[str, Any]) -> b.DashboardLink:
    return (
        b.DashboardLink()
        .title(link.get("title", ""))
        .type(m.DashboardLinkType(link.get("type", "dashboards")))
        .icon(link.get("icon", ""))
        .tooltip(link.get("tooltip", ""))
        .url(link.get("url", ""))
        .tags(list(link.get("tags") or []))
        .as_dropdown(bool(link.get("asDropdown")))
        .target_blank(bool(link.get("targetBlank")))
        .include_vars(bool(link.get("includeVars")))
        .keep_time(bool(link.get("keepTime")))
    )


def to_v2(classic: dict[str, Any]) -> dict[str, Any]:
    """The v2 resource (apiVersion, kind, metadata, spec) of a classic dashboard model; the spec is the SDK's
    model (encode it with the SDK's ``JSONEncoder``)."""
    dash = (
        b.Dashboard(classic["title"])
        .description(classic.get("description") or "")
        .tags(list(classic.get("tags") or []))
        .editable(bool(classic.get("editable")))
        .cursor_sync(CURSOR_SYNC.get(int(classic.get("graphTooltip") or 0), m.DashboardCursorSync.OFF))
        .preload(False)
        .links([_link(link) for link in classic.get("links") or []])
        .time_settings(
            b.TimeSettings()
            .from_val(classic["time"]["from"])
            .to(classic["time"]["to"])
            .auto_refresh(classic.get("refresh") or "")
            .timezone(classic.get("timezone") or "browser")
            .fiscal_year_start_month(int(classic.get("fiscalYearStartMonth") or 0))
            .hide_timepicker(False)
        )
        .variables([_variable(v) for v in classic["templating"]["list"]])
        .annotations([_annotation(a) for a in classic["annotations"]["list"]])
    )
    rows: list[tuple[dict[str, Any] | None, list[dict[str, Any]]]] = []
    for p in sorted(classic["panels"], key=lambda p: (p["gridPos"]["y"], p["gridPos"]["x"])):
        if p["type"] == "row":
            rows.append((p, []))
            continue
        if not rows:
            rows.append((None, []))
        rows[-1][1].append(p)
        dash = dash.element(f"panel-{p['id']}", _panel(p))
    layout = b.Rows()
    for row, members in rows:
        top = (row["gridPos"]["y"] + row["gridPos"]["h"]) if row is not None else 0
        grid = b.Grid().items([_grid_item(f"panel-{p['id']}", p["gridPos"], top) for p in members])
        layout = layout.row(
            b.Row()
            .title(row.get("title", "") if row is not None else "")
            .collapse(bool(row.get("collapsed")) if row is not None else False)
            .hide_header(row is None)
            .layout(grid)
        )
    dash = dash.layout(layout)
    return {"apiVersion": API_VERSION, "kind": "Dashboard", "metadata": {"name": classic["uid"]}, "spec": dash.build()}
