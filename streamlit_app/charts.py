"""Vega-Lite charts (Altair) on one shared time axis, with the query's events drawn as rules.

Every chart of a page gets the same x domain, so a restart, a restore or a stall lines up with the
batch duration, the state size and the lag above and below it.
"""

from __future__ import annotations

from typing import Sequence

import altair as alt
import pandas as pd

from observer.signals import kinds as k

EVENT_COLORS = {
    k.QUERY_STARTED: "#2ca02c", k.QUERY_RESTARTED: "#ff7f0e", k.QUERY_TERMINATED: "#7f7f7f", k.CRASH_LOOP: "#d62728",
    k.RESTORE: "#9467bd", k.STORE_RELOAD: "#8c564b", k.STALLED: "#d62728", k.STALL_RECOVERED: "#17becf",
    k.EXECUTOR_ADDED: "#bcbd22", k.EXECUTOR_REMOVED: "#e377c2", k.QUERY_IDLE: "#c7c7c7", k.PARTITIONS_CHANGED: "#1f77b4",
    k.STATE_UNBOUNDED: "#d62728", k.STATE_BOUNDED: "#2ca02c", k.FALLING_BEHIND: "#ff9896", k.CAUGHT_UP: "#98df8a",
    k.KAFKA_LAG_GROWING: "#ff9896", k.KAFKA_PARTITION_STUCK: "#d62728", k.KAFKA_PARTITION_RECOVERED: "#2ca02c",
    k.KAFKA_PARTITIONS_ADDED: "#1f77b4", k.KAFKA_OFFSETS_REWOUND: "#d62728", k.KAFKA_OFFSETS_SKIPPED: "#d62728",
    k.KAFKA_LATEST_WENT_BACK: "#d62728", k.KAFKA_CATCH_UP_FORECAST: "#9467bd", k.KAFKA_CAUGHT_UP: "#98df8a",
}
"""A color per signal kind (``observer.signals.kinds.SIGNAL_KINDS``)."""
HEIGHT = 180


def with_time(frame: pd.DataFrame, column: str = "ts") -> pd.DataFrame:
    """A copy with ``time`` as a UTC datetime made from the epoch seconds in ``column``."""
    out = frame.copy()
    out["time"] = pd.to_datetime(out[column], unit="s", utc=True)
    return out


def domain(*frames: pd.DataFrame) -> list[str] | None:
    """The shared x domain over the frames' ``time`` columns."""
    times = pd.concat([f["time"] for f in frames if f is not None and len(f)], ignore_index=True) if any(
        f is not None and len(f) for f in frames) else pd.Series(dtype="datetime64[ns, UTC]")
    if times.empty:
        return None
    return [times.min().isoformat(), times.max().isoformat()]


def _x(dom: list[str] | None) -> alt.X:
    return alt.X("time:T", title=None, scale=alt.Scale(domain=dom) if dom else alt.Undefined)


def event_rules(events: pd.DataFrame | None, dom: list[str] | None) -> alt.Chart | None:
    """Vertical rules at the events, coloured by kind, with the kind and attributes as tooltip."""
    if events is None or events.empty:
        return None
    kinds = sorted(events["kind"].unique())
    color = alt.Color("kind:N", title="event", scale=alt.Scale(domain=kinds, range=[EVENT_COLORS.get(k, "#333") for k in kinds]))
    return alt.Chart(events).mark_rule(strokeDash=[4, 3], opacity=0.8).encode(
        x=_x(dom), color=color, tooltip=["kind:N", "time:T", "detail:N"])


def lines(frame: pd.DataFrame, fields: Sequence[str], title: str, unit: str, dom: list[str] | None,
          events: pd.DataFrame | None = None, stacked: bool = False, series: str | None = None) -> alt.LayerChart | alt.Chart:
    """One line (or stacked area) per field, or per value of ``series`` when one field is given."""
    if series:
        long = frame[["time", series, fields[0]]].rename(columns={series: "series", fields[0]: "value"})
    else:
        long = frame.melt(id_vars=["time"], value_vars=list(fields), var_name="series", value_name="value")
    long = long.dropna(subset=["value"])
    mark = alt.Chart(long).mark_area(opacity=0.85) if stacked else alt.Chart(long).mark_line(point=len(frame) < 60)
    chart = mark.encode(
        x=_x(dom), y=alt.Y("value:Q", title=unit, stack="zero" if stacked else None),
        color=alt.Color("series:N", title=None), tooltip=["time:T", "series:N", alt.Tooltip("value:Q", format=",.2f")],
    ).properties(title=title, height=HEIGHT)
    rules = event_rules(events, dom)
    return (chart + rules).resolve_scale(color="independent") if rules is not None else chart


def event_strip(events: pd.DataFrame, dom: list[str] | None) -> alt.Chart:
    """The event timeline: one row per kind, one tick per event."""
    kinds = sorted(events["kind"].unique())
    return alt.Chart(events).mark_tick(thickness=3, size=18).encode(
        x=_x(dom), y=alt.Y("kind:N", title=None, sort=kinds),
        color=alt.Color("kind:N", legend=None, scale=alt.Scale(domain=kinds, range=[EVENT_COLORS.get(k, "#333") for k in kinds])),
        tooltip=["kind:N", "time:T", "detail:N"],
    ).properties(title="Events", height=50 + 24 * len(kinds))  # "fit" autosize counts title and axis in the height


def heatmap(frame: pd.DataFrame, x: str, y: str, value: str, title: str, x_title: str) -> alt.Chart:
    """Partitions x batches: skew and lag at a glance."""
    return alt.Chart(frame).mark_rect().encode(
        x=alt.X(f"{x}:O", title=x_title, axis=alt.Axis(labelOverlap=True)),
        y=alt.Y(f"{y}:O", title="partition"),
        color=alt.Color(f"{value}:Q", title=value.replace("_", " "), scale=alt.Scale(scheme="orangered")),
        tooltip=[f"{x}:O", f"{y}:O", alt.Tooltip(f"{value}:Q", format=",.0f")],
    ).properties(title=title, height=max(120, 14 * frame[y].nunique()))


def run_overlay(frame: pd.DataFrame, field: str, title: str, unit: str) -> alt.Chart:
    """One line per run over seconds since the run's first batch."""
    return alt.Chart(frame.dropna(subset=[field])).mark_line(point=len(frame) < 120).encode(
        x=alt.X("seconds_into_run:Q", title="seconds into the run"), y=alt.Y(f"{field}:Q", title=unit),
        color=alt.Color("run:N", title=None), tooltip=["run:N", "batch_id:Q", alt.Tooltip(f"{field}:Q", format=",.1f")],
    ).properties(title=title, height=HEIGHT)
