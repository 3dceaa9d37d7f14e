"""A backtest report for people: a terminal table, the alert history across applications, a self-contained
HTML timeline, or JSON (which carries the history too)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import html
import json

from spark_state_observer.offline.backtest.history import alert_history
from spark_state_observer.offline.backtest.report import BacktestReport


def _time(t: float | None) -> str:
    if t is None:
        return "-"
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def _short_labels(labels: dict[str, str]) -> str:
    keep = [f"{k}={v}" for k, v in labels.items() if k not in ("severity", "query_id")]
    return ", ".join(keep)


def bounds_notes(report: BacktestReport) -> list[str]:
    """What of the period was not scraped, hence not evaluated: idle gaps skipped, the scrape cap."""
    notes = []
    if report.gaps:
        skipped = sum(b - a for a, b in report.gaps)
        longest = max(report.gaps, key=lambda g: g[1] - g[0])
        notes.append(
            f"Idle gaps compressed: {len(report.gaps)} gap(s) without events, {_duration(skipped)} in all, were not scraped "
            f"and no alert is evaluated inside them (longest {_time(longest[0])} to {_time(longest[1])})."
        )
    if report.capped_at is not None:
        notes.append(
            f"Scrape cap reached: at most {report.max_scrapes} scrapes (--max-scrapes); nothing after {_time(report.capped_at)} "
            "was scraped or evaluated."
        )
    return notes


def render_table(report: BacktestReport) -> str:
    """The timeline for a terminal: alerts that fired (and those that were only pending), then the signals."""
    lines = [
        f"Backtest {_time(report.start)} to {_time(report.end)} UTC: {report.events} events, {report.scrapes} scrapes "
        f"every {report.scrape_interval:g}s, rules evaluated every {report.eval_interval:g}s"
    ]
    lines.extend(bounds_notes(report))
    fired = report.fired()
    lines.append(f"{len(fired)} alert(s) would have fired" + ("." if fired else ": none."))
    for f in fired:
        until = "still firing at the end" if f.resolved_at is None else f"resolved {_time(f.resolved_at)}"
        lines.append(
            f"  FIRING  {_time(f.firing_at)}  {f.alert} [{f.severity}] for {_duration(f.firing_seconds(report.end))} "
            f"({until}; pending since {_time(f.pending_at)})  {_short_labels(f.labels)}"
        )
        if f.summary:
            lines.append(f"          {f.summary}")
        if f.runbook_url:
            lines.append(f"          runbook: {f.runbook_url}")
    pending = [f for f in report.firings if not f.fired]
    for f in pending:
        lines.append(
            f"  pending {_time(f.pending_at)}  {f.alert} never reached its 'for' (ended {_time(f.resolved_at)})  {_short_labels(f.labels)}"
        )
    lines.append(f"{len(report.signals)} signal(s):")
    for s in report.signals:
        attrs = ", ".join(f"{k}={v}" for k, v in s["attributes"].items() if v is not None)
        lines.append(f"  {_time(s['time'])}  {s['kind']:<18} {s['query']}  {attrs}")
    for e in report.errors:
        lines.append(f"  problem: {e}")
    return "\n".join(lines)


def render_html(report: BacktestReport) -> str:
    """One self-contained HTML file: alert bars and signal marks on one time axis (no scripts)."""
    width, left, row = 1000, 260, 22
    span = max(report.end - report.start, 1.0)

    def x(t: float) -> float:
        return left + (t - report.start) / span * (width - left - 10)

    rows = report.firings
    height = (len(rows) + 3) * row + 30
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">']
    for i in range(6):
        t = report.start + span * i / 5
        svg.append(
            f'<line x1="{x(t):.1f}" y1="10" x2="{x(t):.1f}" y2="{height - 20}" stroke="#ddd"/>'
            f'<text x="{x(t):.1f}" y="{height - 5}" text-anchor="middle">{_time(t)[11:]}</text>'
        )
    colours = {"critical": "#c0392b", "warning": "#e67e22", "info": "#2980b9"}
    for i, f in enumerate(rows):
        y = 20 + i * row
        label = html.escape(f"{f.alert} {_short_labels(f.labels)}"[:40])
        svg.append(f'<text x="4" y="{y + 12}">{label}</text>')
        end = f.resolved_at if f.resolved_at is not None else report.end
        svg.append(
            f'<rect x="{x(f.pending_at):.1f}" y="{y}" width="{max(x(end) - x(f.pending_at), 2):.1f}" height="14" '
            f'fill="#f5d6a0"><title>pending {_time(f.pending_at)}</title></rect>'
        )
        if f.firing_at is not None:
            svg.append(
                f'<rect x="{x(f.firing_at):.1f}" y="{y}" width="{max(x(end) - x(f.firing_at), 2):.1f}" height="14" '
                f'fill="{colours.get(f.severity, "#7f8c8d")}"><title>{html.escape(f.alert)} firing {_time(f.firing_at)} for '
                f"{_duration(f.firing_seconds(report.end))}</title></rect>"
            )
    y = 20 + len(rows) * row + 10
    svg.append(f'<text x="4" y="{y + 12}">signals</text>')
    for s in report.signals:
        svg.append(
            f'<circle cx="{x(s["time"]):.1f}" cy="{y + 7}" r="5" fill="#34495e"><title>{html.escape(_time(s["time"]))} '
            f"{html.escape(s['kind'])} {html.escape(str(s['query']))}</title></circle>"
        )
    svg.append("</svg>")
    table = "\n".join(
        f"<tr><td>{html.escape(f.alert)}</td><td>{html.escape(f.severity)}</td><td>{html.escape(_short_labels(f.labels))}</td>"
        f"<td>{_time(f.pending_at)}</td><td>{_time(f.firing_at)}</td><td>{_duration(f.firing_seconds(report.end))}</td>"
        f"<td>{'<a href=' + chr(34) + html.escape(f.runbook_url) + chr(34) + '>runbook</a>' if f.runbook_url else ''}</td></tr>"
        for f in report.firings
    )
    return (
        "<!doctype html><meta charset='utf-8'><title>spark-state-observer alert backtest</title>"
        f"<h1>Alert backtest</h1><p>{_time(report.start)} to {_time(report.end)} UTC; {report.events} events; "
        f"{len(report.fired())} alert(s) fired.</p>{''.join(f'<p>{html.escape(n)}</p>' for n in bounds_notes(report))}{''.join(svg)}"
        "<table border='1' cellpadding='4'><tr><th>alert</th><th>severity</th><th>labels</th><th>pending</th>"
        f"<th>firing</th><th>fired for</th><th></th></tr>{table}</table>"
    )


def render_history(report: BacktestReport) -> str:
    """One line per fire, resolve and re-fire, with the application the query ran in at that moment."""
    history = alert_history(report)
    lines = [f"Alert history {_time(report.start)} to {_time(report.end)} UTC: {len(history)} change(s)."]
    lines.extend(bounds_notes(report))
    for t in history:
        where = f"in {t.application} (start {t.run} of the query)" if t.application else "before the query started"
        lines.append(f"  {_time(t.time)}  {t.change:<8}  {t.alert}  {_short_labels(t.labels)}  {where}")
    return "\n".join(lines)


def render(report: BacktestReport, fmt: str) -> str:
    if fmt == "json":
        doc = report.to_json()
        doc["history"] = [dataclasses.asdict(t) for t in alert_history(report)]
        return json.dumps(doc, indent=2, default=str)
    if fmt == "history":
        return render_history(report)
    if fmt == "html":
        return render_html(report)
    return render_table(report)
