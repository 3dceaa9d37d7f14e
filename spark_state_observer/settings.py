"""Observer settings: keyword arguments to ``attach()``, each readable from an environment variable.

A job is configured without code changes beyond the one ``attach`` line: every field below can be set
with ``SPARK_STATE_OBSERVER_<FIELD>`` (upper case). Keyword arguments win over the environment, the
environment wins over the defaults. The README's settings table is generated from ``SETTINGS_DOC``.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_state_observer.metrics.catalog import RESERVED_LABELS
from spark_state_observer.model.config_decode import DecodeProblem, decode
from spark_state_observer.model.identity import LabelsError, Pairs, parse_labels

ENV_PREFIX = "SPARK_STATE_OBSERVER_"
# defaults other parts read too (the browser judges stalls and finds the history like the observer)
DEFAULT_HISTORY_PATH = "spark-state-observer-history.db"
DEFAULT_STALL_FACTOR = 6.0
DEFAULT_STALL_MIN_SECONDS = 30.0
DEFAULT_LOST_MIN_SECONDS = 120.0
# a scheduled query's next run is overdue once it is this share of its interval late, and at least this many
# seconds (the mixin's SparkStreamingScheduledRunOverdue and the browser's verdict judge alike)
DEFAULT_SCHEDULE_LATE_SHARE = 0.25
DEFAULT_SCHEDULE_LATE_MIN_SECONDS = 300.0
# the crash-loop rule: this many counted restarts within this window (the lifecycle rule, its gauge and
# SparkStreamingQueryCrashLooping; the browser's crash-loop verdict judges alike)
DEFAULT_CRASH_LOOP_RESTARTS = 3
DEFAULT_CRASH_LOOP_WINDOW_SECONDS = 900.0


SECRET_FIELDS = frozenset({"basic_auth_password"})
# the scheme bounded (real ones are a few letters): unbounded, each letter of a long word started a scan to its
# end, 2.2 s of CPU for a 40 KB message
_URL_PASSWORD = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)(?P<user>[^:/@\s]*):(?P<password>[^@/\s]*)@")


def redact_url(text: str) -> str:
    """Mask the password of any ``scheme://user:password@`` in ``text`` (URLs go to logs and reprs)."""
    return _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)


class SettingsError(ValueError):
    """A setting has a value that cannot be used; the message names the setting and its source."""


@dataclass(frozen=True)
class Settings:
    """Everything the observer can be told. Defaults suit a job on one host with Prometheus scraping it."""

    # Identity of the application on every series and signal (listener and watcher alike)
    labels: str = field(
        default="",
        metadata={
            "doc": "Static labels put on every series, signal and OTLP resource, e.g. `cluster=a,namespace=b` (the application name goes to the `app` label by itself; a name a series uses itself, such as `query` or `topic`, is refused)."
        },
    )
    # Prometheus HTTP endpoint
    http_enabled: bool = field(default=True, metadata={"doc": "Serve /metrics over HTTP."})
    http_host: str = field(
        default="127.0.0.1", metadata={"doc": "Address the endpoint binds to (loopback by default; 0.0.0.0 to be scraped from elsewhere)."}
    )
    http_port: int = field(default=9108, metadata={"doc": "Port of the endpoint; 0 picks a free port (see `handle.http_port`)."})
    tls_certfile: str = field(default="", metadata={"doc": "PEM certificate: serve HTTPS when set together with `tls_keyfile`."})
    tls_keyfile: str = field(default="", metadata={"doc": "PEM private key for HTTPS."})
    tls_client_cafile: str = field(default="", metadata={"doc": "CA file to verify client certificates (mutual TLS)."})
    basic_auth_user: str = field(default="", metadata={"doc": "User name required on /metrics (and sent to the Pushgateway) when set."})
    basic_auth_password: str = field(default="", metadata={"doc": "Password that goes with `basic_auth_user`."})
    # Pushgateway mode
    pushgateway_url: str = field(
        default="",
        metadata={"doc": "Push the metrics to this Pushgateway (e.g. http://127.0.0.1:9091) instead of, or as well as, serving them."},
    )
    pushgateway_job: str = field(default="spark_state_observer", metadata={"doc": "Pushgateway `job` grouping key."})
    push_interval_seconds: float = field(default=15.0, metadata={"doc": "How often to push; a final push happens on stop()."})
    push_timeout_seconds: float = field(
        default=5.0, metadata={"doc": "Timeout of one push; a failed push is counted, never retried in a loop."}
    )
    stop_flush_seconds: float = field(
        default=1.0,
        metadata={
            "doc": "How long stop() waits, at most, for each exporter's last export (the last push, the last OTLP export); "
            "one not done by then is given up and counted as a failed export."
        },
    )
    # History store
    history_enabled: bool = field(
        default=True, metadata={"doc": "Write every batch, operator figure and event to the history (the browser reads it)."}
    )
    history_path: str = field(
        default=DEFAULT_HISTORY_PATH,
        metadata={
            "doc": "History database: a file path or `sqlite:///relative.db` / `sqlite:////absolute.db` (embedded SQLite), or `postgresql://user[:password]@host:port/database` (shared, needs the `postgres` extra)."
        },
    )
    history_max_age_seconds: float = field(default=7 * 86400.0, metadata={"doc": "History older than this is deleted."})
    history_max_bytes: float = field(
        default=float(1 << 30), metadata={"doc": "When the history grows past this, the oldest batches are deleted."}
    )
    history_retention: str = field(
        default="",
        metadata={
            "doc": "Ages that differ from `history_max_age_seconds`, per application or query: `app:NAME=SECONDS,query:NAME_OR_ID=SECONDS` (a query's entry wins over its application's)."
        },
    )
    history_buffer_rows: int = field(
        default=50_000,
        metadata={
            "doc": "PostgreSQL history, and the watcher's SQLite history: rows held while the database is unreachable or its disk full (retried with backoff); events beyond are dropped and counted."
        },
    )
    # Capture and pipeline
    queue_size: int = field(
        default=10_000,
        metadata={"doc": "Events held between the Spark callback and the worker; on overflow the oldest is dropped and counted."},
    )
    fast_path: bool = field(
        default=True,
        metadata={"doc": "Take each event as one JSON string from the JVM (classic PySpark); off forces PySpark's own event objects."},
    )
    max_queries: int = field(default=1_000, metadata={"doc": "Queries kept in memory; the oldest terminated ones are forgotten first."})
    partition_top_k: int = field(
        default=10,
        metadata={
            "doc": "Per-partition series kept per operator (snapshot lag) and per Kafka source (lag), most lagging first; 0 turns them off."
        },
    )
    snapshot_lag_batches: float = field(
        default=20,
        metadata={
            "doc": "Snapshot lag (versions since a store instance's last uploaded snapshot, since the first when none) that is normal beyond a maintenance interval's worth of batches; above both, `snapshot_lagging`. Covers `minDeltasForSnapshot` (10)."
        },
    )
    snapshot_scan_seconds: float = field(
        default=30.0,
        metadata={
            "doc": "How often the live observer lists a query's local checkpoint for the snapshot state of every store instance (Spark reports the 5 most lagging); 0: at every batch."
        },
    )
    # Signals: restores, restarts, stalls, growth
    trigger_interval_seconds: float = field(
        default=10.0, metadata={"doc": "Expected trigger interval, used when the observer cannot see the query's own."}
    )
    stall_factor: float = field(
        default=DEFAULT_STALL_FACTOR,
        metadata={"doc": "A non-idle query with no progress for stall_factor x its typical batch interval is stalled."},
    )
    stall_min_seconds: float = field(
        default=DEFAULT_STALL_MIN_SECONDS, metadata={"doc": "Never call a query stalled before this many seconds without progress."}
    )
    lost_min_seconds: float = field(
        default=DEFAULT_LOST_MIN_SECONDS,
        metadata={
            "doc": "Watcher: a running query whose event log has not grown for this long (or longer, as its trigger interval and batches require) without an end is lost: its driver is gone."
        },
    )
    crash_loop_restarts: int = field(
        default=DEFAULT_CRASH_LOOP_RESTARTS,
        metadata={
            "doc": "Restarts within `crash_loop_window_seconds` that make a crash loop (counted when the run before or after a restart crashed)."
        },
    )
    crash_loop_window_seconds: float = field(default=DEFAULT_CRASH_LOOP_WINDOW_SECONDS, metadata={"doc": "Window of the crash-loop rule."})
    query_status_retention_days: float = field(
        default=7.0,
        metadata={
            "doc": "Watcher: a failed or crash-looping query's lifecycle state stays exported and kept in the history this many days after it failed, unless a later run runs or it is retired first."
        },
    )
    query_status_max_queries: int = field(
        default=1000,
        metadata={
            "doc": "Watcher: at most this many failed or crash-looping queries of forgotten applications are kept (the oldest failures go first)."
        },
    )
    growth_window_seconds: float = field(
        default=120.0,
        metadata={
            "doc": "Window over which state growth and eviction are judged; a verdict needs half of it, and with a watermark "
            "and nothing evicted yet its delay plus all of it. Where the event log's plans show a state the watermark evicts "
            "by key (windows, sessions, a deduplication on the event time, a join cleaning both sides: `watch` and `replay` with "
            "placement on, and the listener outside Spark Connect), it is "
            "bounded while the watermark keeps pace, however long its windows; elsewhere keep this above the longest window "
            "or session gap."
        },
    )
    evaluate_seconds: float = field(
        default=5.0,
        metadata={
            "doc": "How often, in a query's event time, the rules run their costly judgements (growth trends); every batch "
            "still updates the windows. A verdict comes at most this much later; 0: at every batch."
        },
    )
    growth_min_batches: int = field(
        default=5, metadata={"doc": "Batches needed in the window before a growth verdict is given (at least one per third)."}
    )
    state_rows_budget: float = field(
        default=0.0, metadata={"doc": "Rows budget per operator for the time-to-budget forecast; 0 means no forecast."}
    )
    state_memory_budget_bytes: float = field(
        default=0.0, metadata={"doc": "Memory budget per operator for the forecast; 0 means no forecast."}
    )
    restore_load_threshold_seconds: float = field(
        default=0.5, metadata={"doc": "Within a run, a RocksDB load latency above this (and 3x the run's median) counts as a reload."}
    )
    falling_behind_window_seconds: float = field(
        default=300.0,
        metadata={
            "doc": "Input and processing rates are averaged over this many seconds of batches to judge falling behind (per-batch rates swing widely on a busy machine)."
        },
    )
    falling_behind_for_seconds: float = field(
        default=120.0,
        metadata={"doc": "Averaged input above `falling_behind_ratio` x averaged processing for this long means falling behind."},
    )
    falling_behind_ratio: float = field(
        default=1.1,
        metadata={
            "doc": "How much faster input must arrive than it is processed (averaged over `falling_behind_window_seconds`) to fall behind; the mixin's threshold of the same name."
        },
    )
    late_rows_window_seconds: float = field(
        default=600.0,
        metadata={"doc": "Rows dropped by the watermark are weighed against the input rows of this many seconds of batches."},
    )
    late_rows_share: float = field(
        default=0.01,
        metadata={
            "doc": "Share of the input rows (or of the rows reaching a deduplication or join) the watermark must drop over `late_rows_window_seconds` for `late_rows_dropped` (an aggregation counts late groups: also when most of its arriving groups are late, or the watermark stands ahead of the trigger time)."
        },
    )
    late_rows_min: float = field(
        default=10.0,
        metadata={
            "doc": "Rows (an aggregation's groups) the watermark must drop over `late_rows_window_seconds` for `late_rows_dropped`, whatever their share."
        },
    )
    placement: str = field(
        default="auto",
        metadata={
            "doc": "Where state partitions run and when they move (the `partition_migrated` signal and the placement metrics): `auto` polls the driver's REST API on the observer's worker once per progress event when Spark's UI is on (classic PySpark), and reads task events in `replay`/`watch`; `on` warns when live polling is impossible; `off` never."
        },
    )
    placement_every: int = field(
        default=1,
        metadata={
            "doc": "Live placement: poll every N-th batch (and at once when a batch shows stores loaded from the checkpoint); divides the driver's cost (~10 ms JVM CPU per poll at 200 partitions) by about N."
        },
    )
    poll_executors: bool = field(
        default=True,
        metadata={"doc": "Poll the driver's executor list (one JVM call, at most once per progress event) to see executors come and go."},
    )
    # OpenTelemetry (OTLP); see README "OpenTelemetry" for the OTEL_* variables also read
    otlp_endpoint: str = field(
        default="",
        metadata={
            "doc": "Export metrics, signal log records (and batch spans) over OTLP to this collector, e.g. http://127.0.0.1:4318 (http/protobuf) or http://127.0.0.1:4317 (grpc); empty: `OTEL_EXPORTER_OTLP_ENDPOINT` if set, else no OTLP export."
        },
    )
    otlp_protocol: str = field(
        default="", metadata={"doc": "`http/protobuf` or `grpc`; empty: `OTEL_EXPORTER_OTLP_PROTOCOL`, else http/protobuf."}
    )
    otlp_interval_seconds: float = field(
        default=0.0, metadata={"doc": "Metric export interval; 0: `OTEL_METRIC_EXPORT_INTERVAL` (ms), else 60 s."}
    )
    otlp_timeout_seconds: float = field(
        default=0.0,
        metadata={
            "doc": "Timeout of one OTLP export, retries included; 0: `OTEL_EXPORTER_OTLP_TIMEOUT`, else 10 s. Failed exports are counted, never block the job."
        },
    )
    otlp_traces: bool = field(default=False, metadata={"doc": "Also export each micro-batch as a span with one child span per phase."})
    otlp_queue_size: int = field(
        default=2048,
        metadata={"doc": "Log records and spans buffered for export; when the collector is away longer, the oldest are dropped."},
    )

    @property
    def static_labels(self) -> Pairs:
        """The ``labels`` setting as label pairs (validated when the settings were built)."""
        return parse_labels(self.labels, RESERVED_LABELS)

    def __repr__(self) -> str:
        """Like the dataclass repr, with passwords masked: settings end up in logs and tracebacks."""
        shown = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in SECRET_FIELDS and value:
                value = "***"
            elif isinstance(value, str):
                value = redact_url(value)
            shown.append(f"{f.name}={value!r}")
        return f"Settings({', '.join(shown)})"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build settings from ``SPARK_STATE_OBSERVER_*`` variables, then apply keyword overrides.

        Both are read by the one typed decoder (``spark_state_observer.model.config_decode``): text becomes the
        field's type, an unknown keyword is refused."""
        env = os.environ if env is None else env
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        unknown = set(overrides) - set(types)
        if unknown:
            raise SettingsError(f"unknown observer setting(s): {', '.join(sorted(unknown))}")
        given: dict[str, tuple[str, Any]] = {}  # field: (where it came from, value)
        for name, ftype in types.items():
            key = ENV_PREFIX + name.upper()
            if key in env:
                given[name] = (key, _text(env[key], ftype))
        for name, value in overrides.items():
            text = isinstance(value, str) and types[name] != "str"
            given[name] = ("keyword argument", _text(value, types[name]) if text else value)
        try:
            settings = decode(cls, {name: value for name, (_, value) in given.items()}, strict=False)
        except DecodeProblem as exc:
            name = exc.path[0] if exc.path else ""
            source, value = given.get(name, ("", ""))
            raise SettingsError(f"setting {name} from {source}: cannot read {str(value).strip()!r} as {types.get(name)}") from None
        settings.validate()
        return settings

    def validate(self) -> None:
        """Reject values that would make the observer misbehave rather than fail later."""
        try:
            parse_labels(self.labels, RESERVED_LABELS)
        except LabelsError as exc:
            raise SettingsError(str(exc)) from None
        if not 0 <= self.http_port <= 65535:
            raise SettingsError(f"http_port must be 0..65535, got {self.http_port}")
        if self.queue_size < 1:
            raise SettingsError(f"queue_size must be at least 1, got {self.queue_size}")
        if self.partition_top_k < 0:
            raise SettingsError(f"partition_top_k must be >= 0, got {self.partition_top_k}")
        if bool(self.tls_certfile) != bool(self.tls_keyfile):
            raise SettingsError("tls_certfile and tls_keyfile must be set together")
        if bool(self.basic_auth_user) != bool(self.basic_auth_password):
            raise SettingsError("basic_auth_user and basic_auth_password must be set together")
        if self.history_buffer_rows < 1:
            raise SettingsError(f"history_buffer_rows must be at least 1, got {self.history_buffer_rows}")
        if self.placement not in ("auto", "on", "off"):
            raise SettingsError(f"placement must be auto, on or off, got {self.placement!r}")
        if self.evaluate_seconds < 0:
            raise SettingsError("evaluate_seconds must be >= 0")
        if self.snapshot_lag_batches < 0 or self.snapshot_scan_seconds < 0:
            raise SettingsError("snapshot_lag_batches and snapshot_scan_seconds must be >= 0")
        if not 0 < self.query_status_retention_days <= 3650 or self.query_status_max_queries < 1:
            raise SettingsError("query_status_retention_days must be in (0, 3650] and query_status_max_queries at least 1")
        if self.placement_every < 1:
            raise SettingsError(f"placement_every must be at least 1, got {self.placement_every}")
        if not (self.late_rows_window_seconds > 0 and 0 <= self.late_rows_share <= 1 and self.late_rows_min >= 0):
            raise SettingsError("late_rows_window_seconds must be > 0, late_rows_share in [0, 1] and late_rows_min >= 0")
        if self.otlp_protocol not in ("", "http/protobuf", "grpc"):
            raise SettingsError(f"otlp_protocol must be http/protobuf or grpc, got {self.otlp_protocol!r}")
        if self.otlp_interval_seconds < 0 or self.otlp_timeout_seconds < 0 or self.otlp_queue_size < 1:
            raise SettingsError("otlp_interval_seconds and otlp_timeout_seconds must be >= 0, otlp_queue_size >= 1")
        if not 0 <= self.stop_flush_seconds <= 300:  # NaN fails the comparison too
            raise SettingsError(f"stop_flush_seconds must be in [0, 300], got {self.stop_flush_seconds}")


def _text(raw: Any, ftype: Any) -> Any:
    """A setting given as text, for the decoder: stripped, and the environment's ways of saying yes and no as booleans."""
    text = str(raw).strip()
    if ftype in (bool, "bool"):
        lowered = text.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off", ""):
            return False
    return text


def settings_table() -> str:
    """Markdown table of every setting, its environment variable and default (for the README)."""
    rows = ["| setting | environment variable | default | meaning |", "|---|---|---|---|"]
    for f in dataclasses.fields(Settings):
        default = f.default if f.default != "" else '""'
        rows.append(f"| `{f.name}` | `{ENV_PREFIX}{f.name.upper()}` | `{default}` | {f.metadata.get('doc', '')} |")
    return "\n".join(rows)
