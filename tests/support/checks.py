"""Assertions shared by the replay and end-to-end tests: exported metrics equal Spark's progress JSON."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

# series that depend on wall-clock time or the live process, not on the events: the live run also
# reads the checkpoint's commit times for the downtime of a restart in a new process
LIVE_ONLY = {"spark_streaming_query_seconds_since_progress", "spark_streaming_executors", "spark_streaming_query_last_downtime_seconds"}


IDENTITY = {"app"}  # the application's label, which a live listener adds and a replay of progress lines cannot know


def samples(text: str, identity: bool = False) -> dict[tuple[str, tuple], float]:
    """Spark-derived samples of an exposition, keyed by name and sorted labels; without ``identity``,
    the application's label is left out of the key (one application per exposition: it tells nothing apart)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("spark_state_observer") or s.name in LIVE_ONLY or s.name == "spark_streaming_application_info":
                continue
            if s.name.startswith(("spark_streaming_", "spark_state_")):
                labels = s.labels if identity else {k: v for k, v in s.labels.items() if k not in IDENTITY}
                out[(s.name, tuple(sorted(labels.items())))] = s.value
    return out


def assert_matches_progress(exposition: str, progress: list[dict], checkpoint_listed: bool = True) -> None:
    """Gauges equal the last batch's values; counters the sum over all batches in ``progress``.

    ``checkpoint_listed``: the observer could list the query's checkpoint (a live one, or a watcher), so its
    snapshot lag may count uploads newer than the progress reports; from progress alone it cannot."""
    got = samples(exposition)
    last = progress[-1]

    def value(name: str, **labels: str) -> float:
        key = (name, tuple(sorted({"query": last["name"] or last["id"], "query_id": last["id"], **labels}.items())))
        assert key in got, f"missing {key}"
        return got[key]

    assert value("spark_streaming_batch_id") == last["batchId"]
    assert value("spark_streaming_batches_total") == len(progress)
    assert value("spark_streaming_input_rows_total") == sum(p["numInputRows"] for p in progress)
    duration = last.get("batchDuration", last["durationMs"]["triggerExecution"])  # 3.5 has no batchDuration
    assert value("spark_streaming_batch_duration_seconds") == pytest.approx(duration / 1000)
    assert value("spark_streaming_phase_duration_seconds", phase="addBatch") == pytest.approx(last["durationMs"]["addBatch"] / 1000)
    for index, op in enumerate(last["stateOperators"]):
        ol = {"operator_index": str(index), "operator": op["operatorName"]}
        assert value("spark_state_rows", **ol) == op["numRowsTotal"]
        assert value("spark_state_memory_used_bytes", **ol) == op["memoryUsedBytes"]
        assert value("spark_state_store_instances", **ol) == op["numStateStoreInstances"]
        assert value("spark_state_rows_updated_total", **ol) == sum(p["stateOperators"][index]["numRowsUpdated"] for p in progress)
        assert value("spark_state_commit_seconds_total", **ol) == pytest.approx(
            sum(p["stateOperators"][index]["commitTimeMs"] for p in progress) / 1000
        )
        custom = op["customMetrics"]
        if "rocksdbSstFileSize" in custom:
            assert value("spark_state_rocksdb_sst_size_bytes", **ol) == custom["rocksdbSstFileSize"]
            assert value("spark_state_rocksdb_gets_total", **ol) == sum(
                p["stateOperators"][index]["customMetrics"]["rocksdbGetCount"] for p in progress
            )
        if "stateOnCurrentVersionSizeBytes" in custom:
            assert value("spark_state_hdfs_current_version_size_bytes", **ol) == custom["stateOnCurrentVersionSizeBytes"]
            assert value("spark_state_hdfs_loaded_map_cache_misses", **ol) == custom["loadedMapCacheMissCount"]
        for key, v in custom.items():
            if key.startswith("SnapshotLastUploaded.") and v >= 0:
                partition, store = key.split(".partition_")[1].split("_", 1)
                il = dict(ol, partition=partition, store=store)
                assert value("spark_state_snapshot_last_uploaded_version", **il) == v
                lag = value("spark_state_snapshot_lag_batches", **il)
                if checkpoint_listed:
                    # the live observer also lists the checkpoint: a snapshot the maintenance thread uploaded after the
                    # batch reported its last upload (in the listing at that progress) makes the lag smaller, not larger
                    assert 0 <= lag <= last["batchId"] + 1 - v
                else:
                    assert lag == last["batchId"] + 1 - v
