"""Per-store-instance metrics of Spark 4.1+: the snapshot versions its stores uploaded, and the snapshot health of
every store instance per operator (``spark_state_observer.signals.snapshots``).

Specs are written here and assembled, checked and exported by ``spark_state_observer.metrics.catalog``, the one module
emitters import (``catalog.X``); see its docstring for what the kinds mean.
"""

from __future__ import annotations

from spark_state_observer.metrics.spec import MetricSpec, gauge

# --- per store instance (4.1+), bounded to the top-K most lagging ------------------------------------
SNAPSHOT_LAST_UPLOADED = gauge(
    "SnapshotLastUploaded",
    "spark_state_snapshot_last_uploaded_version",
    "",
    "Last state version whose snapshot this store instance uploaded (only the most lagging instances are reported; -1 'none yet' is not exported).",
    "instance",
    since="4.1",
)
SNAPSHOT_LAG_BATCHES = gauge(
    "",
    "spark_state_snapshot_lag_batches",
    "",
    "Versions committed since this store instance's last uploaded snapshot, counted from the first version when it never uploaded: "
    "about the changelog files a restart would replay (top-K most lagging instances; from the checkpoint's listing where it is readable).",
    "instance",
    source="signal",
    since="4.1",
)
SNAPSHOT_INSTANCES_WITHOUT_UPLOAD = gauge(
    "",
    "spark_state_snapshot_instances_without_upload",
    "",
    "Reported store instances that have not uploaded a snapshot yet in this run (Spark's -1).",
    "operator",
    source="signal",
    since="4.1",
)
# --- snapshot health of every store instance (spark_state_observer.signals.snapshots), per operator -------------
SNAPSHOT_MAX_LAG_BATCHES = gauge(
    "",
    "spark_state_snapshot_max_lag_batches",
    "",
    "Largest snapshot lag over all the operator's store instances (never uploaded: counted from the first version); "
    "exact from the progress, whose top-K report always holds the most lagging instance.",
    source="signal",
    since="4.1",
)
SNAPSHOT_INSTANCES_NEVER_UPLOADED = gauge(
    "",
    "spark_state_snapshot_instances_never_uploaded",
    "",
    "Store instances of the operator without any uploaded snapshot: from the checkpoint's listing where readable, "
    "else from the progress (a lower bound while spark_state_snapshot_instances_unknown is above 0).",
    source="signal",
    since="4.1",
)
SNAPSHOT_INSTANCES_UNKNOWN = gauge(
    "",
    "spark_state_snapshot_instances_unknown",
    "",
    "Store instances whose snapshot state neither the progress (Spark reports the most lagging few) nor the checkpoint's listing tells.",
    source="signal",
    since="4.1",
)
SNAPSHOT_INSTANCES_LAGGING = gauge(
    "",
    "spark_state_snapshot_instances_lagging",
    "",
    "Store instances whose snapshot lag exceeds what is normal (setting snapshot_lag_batches plus a maintenance interval's worth of batches).",
    source="signal",
    since="4.1",
)
SNAPSHOT_RESTORE_REPLAY_FILES = gauge(
    "",
    "spark_state_snapshot_restore_replay_files",
    "files",
    "Changelog (or delta) files a restore of all the operator's store instances would replay after their newest snapshot, "
    "from the checkpoint's listing (absent where the checkpoint cannot be read).",
    source="signal",
    since="4.1",
)
INSTANCE_METRICS: tuple[MetricSpec, ...] = (
    SNAPSHOT_LAST_UPLOADED,
    SNAPSHOT_LAG_BATCHES,
    SNAPSHOT_INSTANCES_WITHOUT_UPLOAD,
    SNAPSHOT_MAX_LAG_BATCHES,
    SNAPSHOT_INSTANCES_NEVER_UPLOADED,
    SNAPSHOT_INSTANCES_UNKNOWN,
    SNAPSHOT_INSTANCES_LAGGING,
    SNAPSHOT_RESTORE_REPLAY_FILES,
)
UNKNOWN_INSTANCE_METRIC = gauge(
    "",
    "spark_state_instance_metric",
    "",
    "Per-instance metrics this observer does not know yet (label metric), top-K by value.",
    "instance",
    labels=("metric",),
)
