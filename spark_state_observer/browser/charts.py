"""Vega-Lite charts (Altair) on one shared time axis, with the query's events drawn as rules.

Every chart of a page gets the same x domain, the same width for its y axis and its legend below the
plot, so a restart, a restore or a stall lines up with the batch duration, the state size and the lag
above and below it. Times are UTC on a 24-hour clock; tooltips carry the full time with seconds.
Values are scaled to a readable unit (bytes to kB/MB/GB, milliseconds to s/min) before drawing.
Lines break where the query did not run (a restart, an outage, a stall): a row without a value inside
every break between stretches of consecutive batches (``segments``) cuts the path there, so downtime
shows as a gap, never as a straight line that reads like one slow batch. (One path per stretch, as a
Vega-Lite ``detail``, draws the same, but every stretch becomes a facet of its own for each series: a
query with irregular batches took the browser seconds to draw.)
"""

from __future__ import annotations

from typing import Literal, Sequence

import altair as alt
import pandas as pd

from spark_state_observer.browser import fmt
from spark_state_observer.model import signal_kinds as k

# one colour per signal kind (``spark_state_observer.model.signal_kinds.SIGNAL_KINDS``), no two kinds alike
EVENT_COLORS = {
    k.QUERY_STARTED: "#2ca02c",
    k.QUERY_RESTARTED: "#ff7f0e",
    k.QUERY_TERMINATED: "#7f7f7f",
    k.CRASH_LOOP: "#d62728",
    k.RESTORE: "#9467bd",
    k.STORE_RELOAD: "#8c564b",
    k.STALLED: "#e6550d",
    k.STALL_RECOVERED: "#17becf",
    k.QUERY_LOST: "#67000d",
    k.EXECUTOR_ADDED: "#bcbd22",
    k.EXECUTOR_REMOVED: "#e377c2",
    k.QUERY_IDLE: "#c7c7c7",
    k.PARTITIONS_CHANGED: "#1f77b4",
    k.STATE_UNBOUNDED: "#843c39",
    k.STATE_BOUNDED: "#74c476",
    k.FALLING_BEHIND: "#fd8d3c",
    k.CAUGHT_UP: "#9edae5",
    k.LOAD_LATENCY_ANOMALY: "#c49c94",
    k.STATE_TASK_RETRY: "#393b79",
    k.PARTITION_MIGRATED: "#637939",
    k.KAFKA_LAG_GROWING: "#ad494a",
    k.KAFKA_PARTITION_STUCK: "#7b4173",
    k.KAFKA_PARTITION_RECOVERED: "#31a354",
    k.KAFKA_PARTITIONS_ADDED: "#3182bd",
    k.KAFKA_OFFSETS_REWOUND: "#d6616b",
    k.KAFKA_OFFSETS_SKIPPED: "#a55194",
    k.KAFKA_LATEST_WENT_BACK: "#8c6d31",
    k.KAFKA_CATCH_UP_FORECAST: "#bd9e39",
    k.KAFKA_CAUGHT_UP: "#8ca252",
    k.ROCKSDB_MEMORY_IMPLAUSIBLE: "#6b6ecf",
    k.SNAPSHOT_LAGGING: "#e7969c",
    k.STATE_SKEWED: "#b5cf6b",
    k.LATE_ROWS_DROPPED: "#e6a532",
    k.LATE_ROWS_STOPPED: "#6baed6",
    k.RESTORE_STARTED: "#c5b0d5",
    k.RESTORE_PROGRESS: "#dadaeb",
    k.RESTORE_FINISHED: "#756bb1",
}
HEIGHT = 260  # the whole chart: Streamlit's fit autosize takes the title, axis and legend from it
Y_AXIS_WIDTH = 130  # pixels reserved for every chart's y axis (labels and title), so the x axes line up
LEGEND = alt.Legend(orient="bottom", labelLimit=0, title=None, columns=4)
GAP_FACTOR = 5.0  # a step this many times the typical step between points is downtime, not a slow batch


def segments(frame: pd.DataFrame) -> pd.Series:
    """A stretch number per row (rows in time order): a new stretch starts where the run changes or where
    the step to the previous point is more than GAP_FACTOR times the median step (batch or time bucket)."""
    if frame.empty or "ts" not in frame:
        return pd.Series(0, index=frame.index, dtype=int)
    times = frame["ts"].astype(float)
    steps = times.drop_duplicates().sort_values().diff().dropna()
    steps = steps[steps > 0]
    typical = float(steps.median()) if len(steps) else 0.0
    order = times.sort_values(kind="stable")
    step = order.diff()
    breaks = (step > GAP_FACTOR * typical) if typical > 0 else pd.Series(False, index=order.index)
    if "run_id" in frame:
        runs = frame.loc[order.index, "run_id"]
        breaks |= (runs != runs.shift()) & (step > 0) & runs.shift().notna()
    return breaks.astype(int).cumsum().reindex(frame.index)


def with_time(frame: pd.DataFrame, column: str = "ts") -> pd.DataFrame:
    """A copy with ``time`` (a UTC datetime) and ``at`` (its text, with seconds, for tooltips)."""
    out = frame.copy()
    out["time"] = pd.to_datetime(out[column], unit="s", utc=True)
    out["at"] = out[column].map(fmt.when) if len(out) else pd.Series(dtype=str)
    return out


def domain(*frames: pd.DataFrame) -> list[str] | None:
    """The shared x domain over the frames' ``time`` columns."""
    present = [f["time"] for f in frames if f is not None and len(f) and "time" in f]
    if not present:
        return None
    times = pd.concat(present, ignore_index=True)
    lo, hi = times.min(), times.max()
    pad = max((hi - lo) * 0.02, pd.Timedelta(seconds=5))  # marks at the ends stay inside the plot
    return [(lo - pad).isoformat(), (hi + pad).isoformat()]


def time_format(dom: list[str] | None) -> str:
    """Axis labels as precise as the range needs: seconds within minutes, the date across days (24-hour, UTC)."""
    if not dom:
        return "%H:%M"
    span = (pd.Timestamp(dom[1]) - pd.Timestamp(dom[0])).total_seconds()
    return "%H:%M:%S" if span < 600 else "%H:%M" if span < 2 * 86400 else "%m-%d %H:%M"


def _x(dom: list[str] | None) -> alt.X:
    axis = alt.Axis(labelExpr=f"utcFormat(datum.value, '{time_format(dom)}')", title=None, labelOverlap=True)
    return alt.X("time:T", axis=axis, scale=alt.Scale(type="utc", domain=dom) if dom else alt.Scale(type="utc"))


def _y(field: str, title: str, stack: Literal["zero", "center", "normalize"] | None = None, peak: float = 0.0) -> alt.Y:
    """A y axis of the shared width; large counts in SI form (12k, 3.4M), small values with decimals."""
    number_format = "~s" if peak >= 10_000 else ",.2~f"
    return alt.Y(field, title=title, stack=stack, axis=alt.Axis(minExtent=Y_AXIS_WIDTH, maxExtent=Y_AXIS_WIDTH, format=number_format))


def _peak(values: pd.Series) -> float:
    peak = values.abs().max() if len(values) else 0.0
    return 0.0 if pd.isna(peak) else float(peak)


UNITS = {
    "bytes": (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10), ("bytes", 1)),
    "ms": (("h", 3_600_000), ("min", 60_000), ("s", 1000), ("ms", 1)),
    "s": (("h", 3600.0), ("min", 60.0), ("s", 1.0)),
}


def scale_unit(values: pd.Series, unit: str) -> tuple[float, str]:
    """(divisor, unit) making the largest value readable: 10,000,000 bytes are 9.5 MB."""
    steps = UNITS.get(unit)
    peak = values.abs().max() if len(values) else 0
    if steps is None or pd.isna(peak):
        return 1.0, unit
    for name, size in steps:
        if peak >= size:
            return float(size), name
    return float(steps[-1][1]), steps[-1][0]


def event_frame(events: pd.DataFrame) -> pd.DataFrame:
    """Events as drawn: one row per instant (events at the same time share one rule and one tooltip),
    with a plain-words ``label``, the kind of the first event for the colour, and every event in ``detail``."""
    if events is None or events.empty:
        return pd.DataFrame(columns=["time", "at", "ts", "kind", "label", "detail"])
    rows = []
    for ts, group in events.sort_values("ts").groupby("ts", sort=True):
        details = [fmt.kind(k) + (f" ({d})" if d else "") for k, d in zip(group.kind, group.detail)]
        kinds = list(dict.fromkeys(group.kind))
        rows.append({"ts": ts, "kind": kinds[0], "label": " + ".join(fmt.kind(k) for k in kinds), "detail": "; ".join(details)})
    return with_time(pd.DataFrame(rows))


def _kind_color(events: pd.DataFrame, legend: alt.Legend | None) -> alt.Color:
    kinds = list(dict.fromkeys(events["kind"]))
    return alt.Color("kind:N", legend=legend, scale=alt.Scale(domain=kinds, range=[EVENT_COLORS.get(k, "#333") for k in kinds]))


def event_rules(events: pd.DataFrame | None, dom: list[str] | None) -> alt.Chart | None:
    """Vertical rules at the events, one colour per kind, with every event of that instant in the tooltip."""
    if events is None or events.empty:
        return None
    return (
        alt.Chart(events)
        .mark_rule(strokeDash=[4, 3], opacity=0.8)
        .encode(
            x=_x(dom),
            color=_kind_color(events, None),
            tooltip=[alt.Tooltip("at:N", title="time (UTC)"), alt.Tooltip("detail:N", title="events")],
        )
    )


def gaps(frame: pd.DataFrame) -> list[pd.Timestamp]:
    """One instant inside every break between two stretches of ``segments``: where the paths are cut."""
    if frame.empty or "ts" not in frame:
        return []
    spans = frame.groupby(segments(frame).to_numpy())["time"].agg(["min", "max"]).sort_index()
    return [end + (start - end) / 2 for end, start in zip(spans["max"].iloc[:-1], spans["min"].iloc[1:])]


def _stack(long: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """``lo`` and ``hi`` of each series' band, stacked in ``order`` (a series missing at a time counts 0)."""
    if long.empty:
        return long.assign(lo=float("nan"), hi=float("nan"))
    wide = long.pivot_table(index=["time", "at"], columns="series", values="value", aggfunc="sum", fill_value=0.0)
    wide = wide[[s for s in order if s in wide.columns]]
    hi = wide.cumsum(axis=1)
    bands = pd.concat({"value": wide, "lo": hi - wide, "hi": hi}, axis=1).stack(future_stack=True)
    return bands.reset_index()[["time", "at", "series", "value", "lo", "hi"]]


def lines(
    frame: pd.DataFrame,
    fields: Sequence[str],
    title: str,
    unit: str,
    dom: list[str] | None,
    events: pd.DataFrame | None = None,
    stacked: bool = False,
    series: str | None = None,
    names: dict[str, str] | None = None,
) -> alt.LayerChart | alt.Chart:
    """One line (or stacked area) per field, or per value of ``series`` when one field is given; values in
    ``unit`` are rescaled to a readable one (``bytes``, ``ms``, ``s``)."""
    if series:
        long = frame[["time", "at", series, fields[0]]].rename(columns={series: "series", fields[0]: "value"})
    else:
        long = frame.melt(id_vars=["time", "at"], value_vars=list(fields), var_name="series", value_name="value")
        long["series"] = long["series"].map(lambda s: (names or {}).get(s, s))
    long = long.dropna(subset=["value"])
    divisor, shown = scale_unit(long["value"], unit)
    long["value"] = long["value"] / divisor
    if stacked:
        long = _stack(long, [(names or {}).get(f, f) for f in fields])
    cuts = pd.DataFrame([(t, s) for t in gaps(frame) for s in long["series"].unique()], columns=["time", "series"])
    if len(cuts):  # rows without a value: each path breaks there (Vega-Lite's default for invalid values, made explicit)
        long = pd.concat([long, cuts], ignore_index=True).sort_values("time", kind="stable")
    if stacked:
        mark = alt.Chart(long).mark_area(opacity=0.85, invalid="break-paths-show-domains")
        y = {"y": _y("hi:Q", shown, None, _peak(long["hi"].dropna())), "y2": alt.Y2("lo:Q")}
    else:
        mark = alt.Chart(long).mark_line(point=len(frame) < 60, invalid="break-paths-show-domains")
        y = {"y": _y("value:Q", shown, None, _peak(long["value"].dropna()))}
    chart = mark.encode(
        x=_x(dom),
        color=alt.Color("series:N", legend=LEGEND),
        tooltip=[
            alt.Tooltip("at:N", title="time (UTC)"),
            alt.Tooltip("series:N", title="series"),
            alt.Tooltip("value:Q", title=shown, format=",.2f"),
        ],
        **y,
    ).properties(title=title, height=HEIGHT)
    rules = event_rules(events, dom)
    return (chart + rules).resolve_scale(color="independent") if rules is not None else chart


def event_strip(events: pd.DataFrame, dom: list[str] | None) -> alt.Chart:
    """The event timeline: one labelled row per kind, one tick per instant; its y axis is as wide as the
    charts' below it, so the ticks sit above the same times."""
    order = list(dict.fromkeys(events["label"]))
    return (
        alt.Chart(events)
        .mark_tick(thickness=3, size=16)
        .encode(
            x=_x(dom),
            y=alt.Y(
                "label:N",
                title=None,
                sort=order,
                axis=alt.Axis(minExtent=Y_AXIS_WIDTH, maxExtent=Y_AXIS_WIDTH, labelLimit=Y_AXIS_WIDTH - 8),
            ),
            color=_kind_color(events, None),
            tooltip=[alt.Tooltip("at:N", title="time (UTC)"), alt.Tooltip("detail:N", title="events")],
        )
        .properties(title="Events", height=80 + 26 * len(order))
    )


HEATMAP_PX, MIN_ROW_PX, MAX_ROW_PX = 900, 4, 24  # rows share about 900 px, each 4 to 24 px tall


def heatmap(frame: pd.DataFrame, x: str, y: str, value: str, title: str, x_title: str, unit: str = "") -> alt.Chart:
    """Partitions x batches: skew and lag at a glance (a readable row height however many partitions)."""
    rows = frame[y].nunique()
    data = frame.copy()
    x_order = list(dict.fromkeys(data[x]))  # the frame's order (time, partition), not the labels' text order
    y_order = list(dict.fromkeys(data.sort_values("partition")[y])) if "partition" in data and y != "partition" else alt.Undefined
    divisor, shown = scale_unit(data[value], unit) if unit else (1.0, value.replace("_", " "))
    data[value] = data[value] / divisor
    return (
        alt.Chart(data)
        .mark_rect()
        .encode(
            x=alt.X(f"{x}:O", title=x_title, sort=x_order, axis=alt.Axis(labelOverlap=True, labelAngle=-45)),
            y=alt.Y(
                f"{y}:O", title="partition", sort=y_order, axis=alt.Axis(labelOverlap=True, minExtent=Y_AXIS_WIDTH, maxExtent=Y_AXIS_WIDTH)
            ),
            color=alt.Color(f"{value}:Q", title=shown, scale=alt.Scale(scheme="orangered"), legend=alt.Legend(orient="bottom")),
            tooltip=[f"{x}:O", f"{y}:O", alt.Tooltip(f"{value}:Q", title=shown, format=",.1f")],
        )
        .properties(title=title, height=row_step(rows))
    )


def row_step(rows: int) -> alt.Step:
    """A heatmap's height as a height per row: a fixed height in pixels is the whole chart's in Streamlit, and
    the axis, title and a bottom legend took all of it, collapsing every row into one line."""
    return alt.Step(max(MIN_ROW_PX, min(MAX_ROW_PX, HEATMAP_PX // max(rows, 1))))


def run_overlay(frame: pd.DataFrame, field: str, title: str, unit: str) -> alt.Chart:
    """One line per run over seconds since the run's first batch."""
    data = frame.dropna(subset=[field]).copy()
    divisor, shown = scale_unit(data[field], unit)
    data[field] = data[field] / divisor
    return (
        alt.Chart(data)
        .mark_line(point=len(frame) < 120)
        .encode(
            x=alt.X("seconds_into_run:Q", title="seconds into the run"),
            y=_y(f"{field}:Q", shown, peak=_peak(data[field])),
            color=alt.Color("run:N", legend=LEGEND),
            tooltip=["run:N", "batch_id:Q", alt.Tooltip(f"{field}:Q", title=shown, format=",.2f")],
        )
        .properties(title=title, height=HEIGHT)
    )


def restore_points(frame: pd.DataFrame, dom: list[str] | None, events: pd.DataFrame | None) -> alt.LayerChart | alt.Chart:
    """Restore and reload durations per operator on the time axis (points: one per restart or reload)."""
    divisor, shown = scale_unit(frame["seconds"], "s")
    data = frame.assign(value=frame["seconds"] / divisor)
    chart = (
        alt.Chart(data)
        .mark_point(filled=True, size=90)
        .encode(
            x=_x(dom),
            y=_y("value:Q", shown, peak=_peak(data["value"])),
            color=alt.Color("series:N", legend=LEGEND),
            shape=alt.Shape("what:N", legend=alt.Legend(orient="bottom", title=None)),
            tooltip=[
                alt.Tooltip("at:N", title="time (UTC)"),
                alt.Tooltip("series:N", title="operator"),
                alt.Tooltip("what:N", title="what"),
                alt.Tooltip("duration:N", title="took"),
                alt.Tooltip("detail:N", title="details"),
            ],
        )
        .properties(title="Restores (first batch after a restart) and reloads (within a run), per operator", height=HEIGHT + 40)
    )
    rules = event_rules(events, dom)
    return (chart + rules).resolve_scale(color="independent") if rules is not None else chart
