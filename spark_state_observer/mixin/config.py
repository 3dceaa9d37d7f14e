"""The mixin's one configuration: selectors and identity labels, thresholds, ``for`` durations, severities,
runbook address, datasource, dashboard folder and the Prometheus Operator objects' placement.

Dashboards and alerts are generated from the same ``MixinConfig`` (as the kubernetes-mixin's ``_config``
is shared by its dashboards and alerts), so a panel selects and aggregates exactly the series an alert
does, and draws the alert's threshold as its red line. A configuration file (YAML or JSON) overrides any
subset of the defaults; a key the defaults do not have is an error naming it, never silently ignored.
``spark-state-observer mixin config`` prints the defaults with every key documented.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# read with the configuration where it is used: re-exported
from spark_state_observer.mixin.config_text import MixinConfigError as MixinConfigError
from spark_state_observer.mixin.config_text import bounded_yaml as bounded_yaml
from spark_state_observer.mixin.config_text import check_texts, document, duration_seconds, read_mapping, show, show_key
from spark_state_observer.mixin.config_text import labels_satisfying as labels_satisfying
from spark_state_observer.mixin.config_text import parse_matchers as parse_matchers
from spark_state_observer.mixin.config_text import quote as quote
from spark_state_observer.mixin.prometheus_text import format_duration
from spark_state_observer.model.config_decode import DecodeProblem, decode, field_hint, value_at
from spark_state_observer.settings import DEFAULT_SCHEDULE_LATE_MIN_SECONDS, DEFAULT_SCHEDULE_LATE_SHARE, Settings
from spark_state_observer.signals import skew
from spark_state_observer.signals.alerts import declared


def alert_defaults() -> dict[str, tuple[str, str]]:
    """Every alert the mixin defines, with its default ``for`` duration and severity: each declared once, next to
    its rule (``spark_state_observer.signals.alerts``; a test checks the rules name the same alerts)."""
    return {a.name: (a.for_, a.severity) for a in declared()}


SEVERITIES = ("critical", "warning", "info")
# Alerts about a query that no longer runs: in fleet mode their series outlive the application only by the
# watcher's grace (then the watcher forgets it and the series go stale), so each must fire within it.
AFTER_END_ALERTS = ("SparkStreamingQueryDown",)
# Alerts that read the lasting lifecycle state (spark_streaming_query_lifecycle): the watcher keeps a failed or
# crash-looping query's series after it forgets the application, and a scheduled one's between its runs, for
# query_status_retention_days at most.
LASTING_ALERTS = (
    "SparkStreamingQueryFailed",
    "SparkStreamingQueryCrashLooping",
    "SparkStreamingQueryLost",
    "SparkStreamingScheduledRunOverdue",
)
# Runbook addresses nobody can open: the repository the early defaults named (it does not exist), reserved
# example hosts (RFC 2606), and template markers left in
PLACEHOLDER_RUNBOOK = re.compile(
    r"github\.com/spark-state-observer/spark-state-observer|//(?:[^/]*\.)?example\.(?:com|net|org)(?:[:/]|$)"
    r"|//[^/]*\.(?:example|invalid)(?:[:/]|$)|[<>]|\b(?:TODO|CHANGEME|CHANGE-ME|REPLACE-?ME)\b",
    re.IGNORECASE,
)
# Unset: each alert links its section of the runbook exported next to the rules (relative), and `mixin export`
# warns; a loopback address would be dead for everyone but the one who opened it.
DEFAULT_RUNBOOK_URL = ""
LOOPBACK = re.compile(r"https?://(?:localhost|127\.[0-9.]+|\[::1\]|0\.0\.0\.0)(?:[:/]|$)", re.IGNORECASE)
RELATIVE_RUNBOOK = "runbook.md"
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# Kubernetes: label keys ([prefix/]name), label values, namespaces
K8S_NAME = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)")
K8S_PREFIX = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")
K8S_NAMESPACE = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")
# thresholds: finite, and no larger than PromQL and the generated tests write as plain numbers
MAX_THRESHOLD = 1e15
MAX_WINDOW_MINUTES = 10 * 525600


# the observer's snapshot_lag_batches default: the dashboards draw the lag the signal calls normal
_SNAPSHOT_LAG_BATCHES = float(next(f.default for f in dataclasses.fields(Settings) if f.name == "snapshot_lag_batches"))  # type: ignore[arg-type]


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@dataclass(frozen=True)
class Thresholds:
    """Levels at which alerts fire; the dashboards draw the same values as their warning and red lines."""

    crash_loop_restarts: float = field(
        default=3,
        metadata=_doc(
            "Query starts within crash_loop_window_minutes, beyond the clean stops within it, that make a crash loop (the observer's own "
            "crash-loop flag also fires)."
        ),
    )
    crash_loop_window_minutes: float = field(default=15, metadata=_doc("Window of the crash-loop rule."))
    schedule_late_share: float = field(
        default=DEFAULT_SCHEDULE_LATE_SHARE,
        metadata=_doc(
            "A query on a schedule whose next run is later than this share of its interval (and schedule_late_min_minutes) "
            "past its due time is overdue (the browser judges alike)."
        ),
    )
    schedule_late_min_minutes: float = field(
        default=DEFAULT_SCHEDULE_LATE_MIN_SECONDS / 60,
        metadata=_doc(
            "The least lateness of a scheduled run that is overdue, whatever its interval (a start-up's time, a scheduler's jitter)."
        ),
    )
    falling_behind_ratio: float = field(
        default=1.1,
        metadata=_doc("Input rate above processing rate by this factor (averaged over falling_behind_window_minutes) is falling behind."),
    )
    falling_behind_window_minutes: float = field(default=10, metadata=_doc("Averaging window of the input and processing rates."))
    kafka_lag_offsets: float = field(
        default=10000,
        metadata=_doc("Kafka records behind the latest (a topic's sum) drawn as the dashboards' red line; no alert reads it."),
    )
    kafka_lag_seconds_slo: float = field(
        default=300,
        metadata=_doc(
            "Freshness SLO: age of the oldest unread Kafka record (max over a topic's partitions) above which SparkStreamingKafkaLagSecondsHigh fires."
        ),
    )
    kafka_anomaly_window_minutes: float = field(
        default=10, metadata=_doc("Window in which offsets that went backwards or skipped raise SparkStreamingKafkaDataLossRisk.")
    )
    restore_seconds: float = field(
        default=300,
        metadata=_doc("A state restore after a restart slower than this alerts; a running one whose elapsed time plus ETA passes it, too."),
    )
    budget_eta_hours: float = field(
        default=6, metadata=_doc("Forecast time to the observer's rows or memory budget below which an alert fires.")
    )
    state_memory_budget_bytes: float = field(
        default=8 * 1024**3,
        metadata=_doc(
            "State memory budget per operator, summed over partitions (RocksDB maxMemoryUsage x partitions, or your executors' share)."
        ),
    )
    state_memory_budget_ratio: float = field(default=0.8, metadata=_doc("Alert above this share of state_memory_budget_bytes."))
    rocksdb_memory_budget_ratio: float = field(
        default=0.8,
        metadata=_doc(
            "Share of an executor's RocksDB budget (its memoryOverhead) above which its estimated or reported RocksDB memory alerts."
        ),
    )
    commit_seconds_per_instance: float = field(
        default=1.0, metadata=_doc("Mean state-store commit time per store instance per batch above which commits are slow.")
    )
    write_stall_seconds_per_batch: float = field(
        default=0.0, metadata=_doc("RocksDB write-stall time per batch above which writes stall (0: any sustained stall).")
    )
    snapshot_lag_batches: float = field(
        default=_SNAPSHOT_LAG_BATCHES,
        metadata=_doc(
            "Batches since a store instance last uploaded a snapshot drawn as the dashboards' red line: the observer's own "
            "snapshot_lag_batches. SparkStateSnapshotUploadLagging reads the observer's judgement (this lag plus a "
            "maintenance interval's batches), so the alert and the snapshot_lagging signal fire together."
        ),
    )
    snapshot_repair_window_minutes: float = field(
        default=60,
        metadata=_doc(
            "Window in which a state snapshot Spark found corrupt and skipped (auto-repair, 4.2+) keeps SparkStateSnapshotAutoRepaired firing."
        ),
    )
    partition_migration_batches: float = field(
        default=3,
        metadata=_doc(
            "Batches with state partitions running on another executor than before, within partition_migration_window_minutes, from which state is moving all the time (one executor loss moves state in one batch)."
        ),
    )
    partition_migration_window_minutes: float = field(default=15, metadata=_doc("Window over which migrating batches are counted."))
    state_skew_ratio: float = field(
        default=skew.RATIO, metadata=_doc("Largest partition's state bytes over the median partition's above which state is skewed.")
    )
    state_skew_min_bytes: float = field(
        default=skew.MIN_BYTES, metadata=_doc("State bytes of the largest partition below which skew is not worth an alert.")
    )
    watermark_lag_seconds: float = field(
        default=2 * 3600,
        metadata=_doc("Trigger time minus watermark above which the watermark lags; set it above your withWatermark delay."),
    )
    batch_duration_seconds: float = field(
        default=60, metadata=_doc("Mean batch duration drawn as the dashboards' red line (no alert: stalls cover it).")
    )


@dataclass(frozen=True)
class Datasource:
    """The Prometheus datasource the dashboards default to and the provisioning file declares."""

    name: str = field(default="Prometheus", metadata=_doc("Datasource name in Grafana."))
    uid: str = field(default="prometheus", metadata=_doc("Datasource uid; the dashboards' $datasource variable defaults to it."))
    url: str = field(default="http://prometheus:9090", metadata=_doc("Prometheus URL written into the datasource provisioning file."))


@dataclass(frozen=True)
class Kubernetes:
    """Where the Prometheus Operator objects go and what they select."""

    namespace: str = field(default="monitoring", metadata=_doc("Namespace of the PrometheusRule, ServiceMonitor and PodMonitor."))
    labels: dict[str, str] = field(
        default_factory=lambda: {"app.kubernetes.io/part-of": "spark-state-observer"},
        metadata=_doc("Labels on those objects; match your Prometheus' ruleSelector / serviceMonitorSelector / podMonitorSelector."),
    )
    watcher_selector: dict[str, str] = field(
        default_factory=lambda: {"app.kubernetes.io/name": "spark-state-observer"},
        metadata=_doc("ServiceMonitor: labels of the event-log watcher's Service (deploy/kubernetes uses these)."),
    )
    watcher_namespaces: list[str] = field(
        default_factory=list, metadata=_doc("ServiceMonitor: namespaces to look for the Service in; empty: the object's own namespace.")
    )
    driver_selector: dict[str, str] = field(
        default_factory=lambda: {"spark-role": "driver"},
        metadata=_doc("PodMonitor: labels of the Spark driver pods running the listener (Spark on Kubernetes sets spark-role=driver)."),
    )
    driver_namespaces: list[str] = field(
        default_factory=list, metadata=_doc("PodMonitor: namespaces of the driver pods; empty: any namespace.")
    )
    port: str = field(default="metrics", metadata=_doc("Name of the container / Service port serving /metrics."))
    scrape_interval: str = field(default="30s", metadata=_doc("Scrape interval of both monitors."))


@dataclass(frozen=True)
class Fleet:
    """How the watcher and the history are deployed, as far as alert timing depends on it: the export
    refuses ``for`` durations that could never fire under these values."""

    grace_seconds: float = field(
        default=300.0,
        metadata=_doc(
            "The watcher's --grace-seconds: a finished or lost application's series stay exported this long, then go. "
            "SparkStreamingQueryDown must fire within it."
        ),
    )
    history_max_age_seconds: float = field(
        default=7 * 86400.0,
        metadata=_doc("The history's retention (setting history_max_age_seconds): nothing about an ended query is kept longer."),
    )
    query_status_retention_days: float = field(
        default=7.0,
        metadata=_doc(
            "The watcher's setting query_status_retention_days: a failed or crash-looping query's lasting state is exported "
            "this long at most. SparkStreamingQueryFailed and -CrashLooping must fire within it, and the history must keep "
            "the failure's runs and events (history_max_age_seconds) at least as long."
        ),
    )
    evaluation_interval: str = field(
        default="1m", metadata=_doc("Prometheus' rule evaluation interval (global evaluation_interval; Prometheus' default is 1m).")
    )


@dataclass(frozen=True)
class Alertmanager:
    """The Alertmanager route example."""

    critical_receiver: str = field(default="streaming-pager", metadata=_doc("Receiver of critical alerts."))
    warning_receiver: str = field(default="streaming-chat", metadata=_doc("Receiver of warning and info alerts."))


@dataclass(frozen=True)
class MixinConfig:
    """Everything the generated dashboards, rules and objects depend on."""

    app_label: str = field(
        default="app",
        metadata=_doc(
            "Label carrying the Spark application's stable identity (its name). Alerts aggregate by it and dashboards get a variable for it."
        ),
    )
    static_labels: list[str] = field(
        default_factory=lambda: ["cluster", "namespace"],
        metadata=_doc(
            "Static identity labels put on every series (by the observer's static labels or by Prometheus relabelling), outermost first, e.g. [cluster, namespace, env]. Alerts aggregate by them and dashboards get a variable for each."
        ),
    )
    selector: str = field(
        default="",
        metadata=_doc("Extra label matchers put into every selector of every rule and panel, e.g. 'job=~\"spark-.*\"' or 'env=\"prod\"'."),
    )
    observer_selector: str = field(
        default='job="spark_state_observer"',
        metadata=_doc("Matchers of the observer endpoints' `up` series (scrape job of drivers and watchers) for SparkStateObserverDown."),
    )
    test_labels: dict[str, str] = field(
        default_factory=dict,
        metadata=_doc(
            "Labels the generated promtool tests put on their series so they match `selector` and `observer_selector`; only needed for regex or negative matchers (equality matchers are taken as they are)."
        ),
    )
    thresholds: Thresholds = field(default_factory=Thresholds, metadata=_doc("Alert levels (also the dashboards' lines)."))
    for_durations: dict[str, str] = field(
        default_factory=lambda: {k: v[0] for k, v in alert_defaults().items()},
        metadata=_doc("`for` duration of each alert (Prometheus duration: 0m, 30s, 10m, 1h)."),
    )
    severities: dict[str, str] = field(
        default_factory=lambda: {k: v[1] for k, v in alert_defaults().items()},
        metadata=_doc("`severity` label of each alert: critical, warning or info."),
    )
    runbook_base_url: str = field(
        default=DEFAULT_RUNBOOK_URL,
        metadata=_doc(
            "Where the runbook opens for whoever gets the alert, e.g. your state browser's runbook page "
            "(https://HOST/runbook) or your own copy of alerts/runbook.md. Each alert's runbook_url is this plus '#' and "
            "the alert name in lower case. Unset: a relative link to the runbook.md exported next to the rules, and "
            "`mixin export` warns. Loopback addresses and placeholders (example hosts, <...>, TODO) are refused."
        ),
    )
    expected_running_selector: str = field(
        default="",
        metadata=_doc(
            "Label matchers of the queries expected to run all the time, e.g. 'query=~\"orders|payments\"'. "
            "SparkStreamingQueryDown fires only for these when they stop cleanly and do not come back; a clean stop of "
            "any other query is planned and never alerts. Unset: SparkStreamingQueryDown is not exported."
        ),
    )
    rule_group_prefix: str = field(default="spark-state-observer", metadata=_doc("Prefix of the rule group names."))
    datasource: Datasource = field(
        default_factory=Datasource, metadata=_doc("Prometheus datasource of the dashboards and the provisioning file.")
    )
    dashboard_folder: str = field(default="Spark state", metadata=_doc("Grafana folder the provisioned dashboards go into."))
    dashboard_path: str = field(
        default="/var/lib/grafana/dashboards/spark-state-observer",
        metadata=_doc("Directory the dashboard provider reads the JSON files from."),
    )
    dashboard_uid_prefix: str = field(
        default="spark-state", metadata=_doc("Prefix of the dashboards' uids (keep it stable: links and bookmarks use it).")
    )
    dashboard_refresh: str = field(default="30s", metadata=_doc("Auto-refresh of the dashboards."))
    fleet: Fleet = field(
        default_factory=Fleet, metadata=_doc("The watcher's grace, the history's retention and the rule evaluation interval, as deployed.")
    )
    kubernetes: Kubernetes = field(default_factory=Kubernetes, metadata=_doc("Prometheus Operator objects."))
    alertmanager: Alertmanager = field(default_factory=Alertmanager, metadata=_doc("Alertmanager route example."))

    @property
    def identity_labels(self) -> list[str]:
        """Static labels then the app label: what every alert and panel groups by, outermost first."""
        return [*self.static_labels, self.app_label]

    @property
    def runbook_url(self) -> str:
        """The address each alert's ``runbook_url`` starts with (then ``#`` and its anchor)."""
        return self.runbook_base_url or RELATIVE_RUNBOOK

    def for_minutes(self, alert: str) -> float:
        """The ``for`` duration of an alert in minutes (for test generation)."""
        return duration_seconds(self.for_durations[alert]) / 60

    def validate(self) -> None:
        """Reject a configuration that would generate invalid or misleading rules, naming the key."""
        for name in self.identity_labels:
            if not LABEL_NAME.fullmatch(name):
                raise MixinConfigError(f"app_label / static_labels: {show(name)} is not a Prometheus label name")
        reserved = {"query", "query_id", "operator", "operator_index", "job", "instance", "severity"}
        if reserved & set(self.identity_labels):
            raise MixinConfigError(
                f"static_labels / app_label must not use the observer's own labels {sorted(reserved & set(self.identity_labels))}"
            )
        if len(set(self.identity_labels)) != len(self.identity_labels):
            raise MixinConfigError("app_label and static_labels repeat a label")
        parse_matchers(self.selector, "selector")
        if not parse_matchers(self.observer_selector, "observer_selector"):
            raise MixinConfigError('observer_selector: at least one matcher is needed, e.g. job="spark_state_observer"')
        for name in self.test_labels:
            if not LABEL_NAME.fullmatch(name):
                raise MixinConfigError(f"test_labels: {show(name)} is not a Prometheus label name")
        for key in ("for_durations", "severities"):
            missing = set(alert_defaults()) - set(getattr(self, key))
            if missing:
                raise MixinConfigError(f"{key}: missing alert(s) {', '.join(sorted(missing))}")
        for alert, value in self.for_durations.items():
            duration_seconds(value, f"for_durations.{alert}")
        duration_seconds(self.kubernetes.scrape_interval, "kubernetes.scrape_interval")
        for alert, value in self.severities.items():
            if value not in SEVERITIES:
                raise MixinConfigError(f"severities.{alert}: {show(value)} is not one of {', '.join(SEVERITIES)}")
        if "{{" in self.runbook_base_url or "}}" in self.runbook_base_url:
            raise MixinConfigError("runbook_base_url: must not contain {{ or }} (Prometheus reads annotations as templates)")
        if self.runbook_base_url and (
            not re.match(r"https?://[^/\s]+", self.runbook_base_url)
            or PLACEHOLDER_RUNBOOK.search(self.runbook_base_url)
            or LOOPBACK.match(self.runbook_base_url)
        ):
            raise MixinConfigError(
                f"runbook_base_url: {show(self.runbook_base_url)} is a placeholder, a loopback address or not an http(s) "
                "address; set it to where your runbook opens for whoever gets the alert (e.g. https://HOST/runbook of the "
                "state browser), or leave it unset for a relative link to the exported runbook.md"
            )
        if self.expected_running_selector:
            parse_matchers(self.expected_running_selector, "expected_running_selector")
        if not self.rule_group_prefix.strip():
            raise MixinConfigError("rule_group_prefix: must not be empty")
        self._validate_kubernetes()
        self._validate_thresholds()
        self._validate_fleet_timing()

    def _validate_kubernetes(self) -> None:
        k = self.kubernetes
        for key, labels in (("labels", k.labels), ("watcher_selector", k.watcher_selector), ("driver_selector", k.driver_selector)):
            for name, value in labels.items():
                prefix, _, base = name.rpartition("/")
                if not K8S_NAME.fullmatch(base) or (prefix and (len(prefix) > 253 or not K8S_PREFIX.fullmatch(prefix))):
                    raise MixinConfigError(f"kubernetes.{key}: {show(name)} is not a Kubernetes label key")
                if value and not K8S_NAME.fullmatch(value):
                    raise MixinConfigError(
                        f"kubernetes.{key}.{name}: {show(value)} is not a Kubernetes label value "
                        "(at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)"
                    )
        for key, names in (
            ("namespace", [k.namespace]),
            ("watcher_namespaces", k.watcher_namespaces),
            ("driver_namespaces", k.driver_namespaces),
        ):
            for name in names:
                if not K8S_NAMESPACE.fullmatch(name):
                    raise MixinConfigError(f"kubernetes.{key}: {show(name)} is not a Kubernetes namespace name")

    def _validate_fleet_timing(self) -> None:
        """Refuse ``for`` durations that cannot fire for a query whose application ended: its series live
        ``fleet.grace_seconds`` after the end (never longer than the history keeps it), the lasting state that
        SparkStreamingQueryFailed and -CrashLooping read ``fleet.query_status_retention_days`` (which the history
        must keep the failure's runs and events for: a longer retention is refused too). In the worst case the
        ended status reaches Prometheus one scrape later, the alert is pending one evaluation after that,
        and firing at the first evaluation its ``for`` has elapsed."""
        f = self.fleet
        retention = f.query_status_retention_days * 86400.0
        for key, value in (("grace_seconds", f.grace_seconds), ("history_max_age_seconds", f.history_max_age_seconds)):
            if not 0 <= value <= MAX_THRESHOLD:
                raise MixinConfigError(f"fleet.{key} must be between 0 and {MAX_THRESHOLD:g} seconds, got {show(value)}")
        if not 0 < retention <= MAX_THRESHOLD:
            raise MixinConfigError(
                f"fleet.query_status_retention_days must be above 0 and at most {MAX_THRESHOLD / 86400:g}, got {show(f.query_status_retention_days)}"
            )
        if retention > f.history_max_age_seconds:
            raise MixinConfigError(
                f"fleet.query_status_retention_days: a failed query stays failed {f.query_status_retention_days:g} days, but the "
                f"history deletes its runs and events after {f.history_max_age_seconds:g} s (fleet.history_max_age_seconds): the "
                f"alert would show a failure whose cause is gone; raise fleet.history_max_age_seconds (and the deployment's "
                f"history_max_age_seconds) to at least {math.ceil(retention)} or lower the retention"
            )
        evaluation = duration_seconds(f.evaluation_interval, "fleet.evaluation_interval")
        if evaluation <= 0:
            raise MixinConfigError("fleet.evaluation_interval must be longer than 0s")
        lag = duration_seconds(self.kubernetes.scrape_interval, "kubernetes.scrape_interval") + evaluation
        ended = min((f.grace_seconds, "fleet.grace_seconds"), (f.history_max_age_seconds, "fleet.history_max_age_seconds"))
        lasting = (retention, "fleet.query_status_retention_days")
        for alert, (bound, key) in [*((a, ended) for a in AFTER_END_ALERTS), *((a, lasting) for a in LASTING_ALERTS)]:
            needed = lag + math.ceil(duration_seconds(self.for_durations[alert]) / evaluation) * evaluation
            if needed > bound:
                longest = math.floor((bound - lag) / evaluation) * evaluation
                shorter = f"shorten it to at most {format_duration(longest)} or " if longest >= 0 else ""
                minimum = f"{needed / 86400:.4g} (days)" if key == lasting[1] else f"{math.ceil(needed)}"
                raise MixinConfigError(
                    f"for_durations.{alert}: {self.for_durations[alert]} can never fire for an application that ended: its series "
                    f"are gone {bound:g} s after the end ({key}: the watcher's --grace-seconds, the history's retention or the "
                    f"lasting state's retention) and the "
                    f"alert needs up to {format_duration(needed)} (a scrape, an evaluation, then its for in whole evaluations); "
                    f"{shorter}raise {key} (and the deployment's value) to at least {minimum}"
                )

    def _validate_thresholds(self) -> None:
        t = self.thresholds
        for name, value in dataclasses.asdict(t).items():
            if not math.isfinite(value):
                raise MixinConfigError(f"thresholds.{name} must be a finite number, got {show(value)}")
            if not 0 <= value <= MAX_THRESHOLD:
                raise MixinConfigError(f"thresholds.{name} must be between 0 and {MAX_THRESHOLD:g}, got {show(value)}")
        if t.crash_loop_restarts < 1 or t.state_memory_budget_bytes <= 0 or not 0 < t.state_memory_budget_ratio <= 1:
            raise MixinConfigError(
                "thresholds: crash_loop_restarts must be >= 1, state_memory_budget_bytes > 0, state_memory_budget_ratio in (0, 1]"
            )
        for name in (
            "crash_loop_window_minutes",
            "falling_behind_window_minutes",
            "kafka_anomaly_window_minutes",
            "partition_migration_window_minutes",
            "snapshot_repair_window_minutes",
        ):
            value = getattr(t, name)
            if not (1 <= value <= MAX_WINDOW_MINUTES and value == int(value)):
                raise MixinConfigError(
                    f"thresholds.{name} must be a whole number of minutes from 1 to {MAX_WINDOW_MINUTES} (a PromQL range), got {show(value)}"
                )


# --- reading a configuration file ------------------------------------------------------------------------
def load_config(path: str | None, overrides: Sequence[str] = ()) -> MixinConfig:
    """The defaults, overridden by the YAML or JSON file at ``path`` (``None``: the defaults), then by
    ``overrides``: ``KEY=VALUE`` strings with dotted keys (``thresholds.restore_seconds=120``,
    ``for_durations.SparkStateUnbounded=5m``), the value read as YAML, so a threshold can be tried from
    the command line (``backtest --set``) without writing a file."""
    if path is None and not overrides:
        config = MixinConfig()
        config.validate()
        return config
    data = read_mapping(path) if path is not None else {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise MixinConfigError(f"--set {show(item)}: expected KEY=VALUE, e.g. thresholds.restore_seconds=120")
        *parents, leaf = key.strip().split(".")
        node = data
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise MixinConfigError(f"--set {show(item)}: {show(part)} is not a section")
            node = child
        try:
            node[leaf] = bounded_yaml(raw) if raw.strip() else ""
        except ValueError as exc:
            raise MixinConfigError(f"--set {show(item)}: the value is not valid YAML: {str(exc)[:300]}") from None
    return config_from_mapping(data)


def config_from_mapping(data: Mapping[str, Any]) -> MixinConfig:
    """Defaults overridden by ``data``, read by the one typed decoder (``spark_state_observer.model.config_decode``):
    unknown keys refused, dictionaries of alerts merged key by key, others replaced."""
    if isinstance(data, Mapping):
        data = {**data, **{key: _alerts(data[key], key) for key in ("for_durations", "severities") if isinstance(data.get(key), Mapping)}}
    try:
        config = decode(MixinConfig, data)
    except DecodeProblem as exc:
        raise MixinConfigError(_refusal(exc, data)) from None
    check_texts(config, "")
    config.validate()
    return config


def _alerts(given: Mapping[Any, Any], key: str) -> dict[Any, Any]:
    """An alert dictionary over its defaults; an alert the mixin does not define is refused."""
    known = alert_defaults()
    unknown = [k for k in given if k not in known]
    if unknown:
        raise MixinConfigError(
            f"unknown alert(s) in {key}: {', '.join(show_key(k) for k in unknown[:5])}; known alerts: {', '.join(known)}"
        )
    return {**getattr(MixinConfig(), key), **given}


def _refusal(problem: DecodeProblem, data: Any) -> str:
    """The decoder's refusal as one line naming the key, as a user wrote it."""
    key = ".".join(problem.path)
    raw = value_at(data, problem.path)
    hint = field_hint(MixinConfig, problem.path)
    if problem.unknown_key or (dataclasses.is_dataclass(hint) and isinstance(raw, Mapping)):  # a key no field has, or not text
        prefix = key + "." if key else ""
        unknown = [k for k in raw if k not in {f.name for f in dataclasses.fields(hint)}]
        return (
            f"unknown key(s) {', '.join(prefix + show_key(k) for k in unknown[:5])}{' ...' if len(unknown) > 5 else ''}; "
            f"known keys: {', '.join(prefix + f.name for f in dataclasses.fields(hint))}"
        )
    if dataclasses.is_dataclass(hint):
        return f"{key or 'configuration'}: expected a mapping, got {type(raw).__name__}"
    if typing.get_origin(hint) in (dict, list):
        return f"{key}: {problem.reason if problem.reason.startswith('a number') else EXPECTED[typing.get_origin(hint)]}"
    if problem.out_of_range:
        return f"{key}: {show(raw)} is too large"
    return f"{key}: expected {'a number' if hint is float else 'a string'}, got {show(raw)}"


EXPECTED = {dict: "expected a mapping of names to strings", list: "expected a list of strings"}


# --- printing the documented defaults --------------------------------------------------------------------
def documented_defaults() -> str:
    """The default configuration as YAML, every key preceded by a comment saying what it does."""
    lines = [
        "# spark-state-observer mixin configuration (defaults). Keep only the keys you change;",
        "# pass the file to: spark-state-observer mixin export --out DIR --config FILE",
        "",
    ]
    document(MixinConfig(), 0, lines)
    return "\n".join(lines) + "\n"
