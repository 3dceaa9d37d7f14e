"""Event logs and checkpoints in an object store: replay and inspect of s3:// and s3a:// URLs on a real s3proxy.

What a URL reads must be what the same files read locally; what goes wrong with the store (no bucket, wrong
credentials, credentials in the URL, a missing extra) is one clear line naming the problem and no secret.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT
from spark_state_observer.capture.storage import StorageError, filesystem, local_name, redact, staged


def cli(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spark_state_observer.cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT, **(env or {})},
        errors="replace",
    )


def bucket() -> Any:
    """A new bucket on the session's s3proxy, through the same client (and environment) the observer uses."""
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    name = f"sso-{uuid.uuid4().hex[:12]}"
    fs.call_s3("create_bucket", Bucket=name)
    return fs, name


def written_log(tmp_path: Path, app_id: str) -> Path:
    """A recorded real Spark log (zstd) written as Spark rolls it, in small parts: its eventlog_v2_ folder."""
    from test_eventlog_watch import _source

    from bench.eventlog_writer import ProgressiveLog, recorded_lines

    log = ProgressiveLog(str(tmp_path / "written"), app_id, "zstd", max_file_bytes=16 << 10)
    for _ in log.steps(recorded_lines(_source("rocksdb_restart"))):
        pass
    log.finish()
    return Path(log.dir)


def test_urls_are_told_from_paths_and_secrets_never_shown() -> None:
    assert redact("s3://AKIA:topsecret@bucket/key and hdfs://u:p@nn:8020/x") == "s3://bucket/key and hdfs://nn:8020/x"
    assert redact("abfs://container@account.dfs.core.windows.net/logs") == "abfs://container@account.dfs.core.windows.net/logs"
    with pytest.raises(StorageError, match="credentials in a URL are refused") as info:
        filesystem("s3://AKIA:topsecret@bucket/logs")
    assert "topsecret" not in str(info.value) and info.value.kind == "credentials"
    with pytest.raises(StorageError, match="unsupported URL scheme 'ftp'"):
        filesystem("ftp://host/logs")
    with staged("/some/local/path") as local:
        assert local == "/some/local/path"
    with staged("file:///some/local/path") as local:
        assert local == "/some/local/path"


def test_keys_that_would_leave_the_copy_are_not_written() -> None:
    assert local_name("/tmp/copy", "/a/b") == os.path.join("/tmp/copy", "a", "b")
    assert local_name("/tmp/copy", "/a/../../etc/passwd") is None
    assert local_name("/tmp/copy", "/./x") is None
    assert local_name("/tmp/copy", "/ünï cödé/ключ") == os.path.join("/tmp/copy", "ünï cödé", "ключ")


@pytest.mark.skipif(importlib.util.find_spec("gcsfs") is not None, reason="gcsfs is installed: the extra is not missing")
def test_a_missing_extra_names_the_extra_to_install() -> None:
    with pytest.raises(StorageError, match=r"pip install 'spark-state-observer\[gcs\]'") as info:
        filesystem("gs://bucket/logs")
    assert info.value.kind == "missing_extra"
    proc = cli(["replay", "gs://bucket/logs"])
    assert proc.returncode == 2 and "spark-state-observer[gcs]" in proc.stderr and "Traceback" not in proc.stderr


class _StoreInMemory:
    """fsspec's own in-memory filesystem under the gs, abfs and hdfs protocols (no real GCS, Azure or HDFS runs here)."""

    @staticmethod
    def make() -> type:
        from fsspec.implementations.memory import MemoryFileSystem

        class StoreInMemory(MemoryFileSystem):  # type: ignore[misc]
            protocol = ("gs", "abfs", "hdfs")

            @classmethod
            def _strip_protocol(cls, path: str) -> str:
                for scheme in ("gs://", "abfs://", "hdfs://"):
                    path = path.removeprefix(scheme)
                return str(super()._strip_protocol(path))

        return StoreInMemory


@pytest.mark.parametrize("url", ["gs://bucket/logs", "abfss://container@account.dfs.core.windows.net/logs", "hdfs://namenode:8020/logs"])
def test_gs_abfs_and_hdfs_urls_are_mirrored_in_order_with_ranged_reads_of_appends(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """URL handling and the mirror on stores whose files grow (HDFS, ADLS appends); untested against the real services."""
    from spark_state_observer.fleet.store_mirror import StoreMirror

    registry = importlib.import_module("fsspec.registry")  # the module (``fsspec.registry`` is also a read-only view)
    memory = _StoreInMemory.make()
    for protocol in ("gs", "abfs", "hdfs"):
        monkeypatch.setitem(registry._registry, protocol, memory)
    fs, path = filesystem(url)
    assert isinstance(fs, memory)
    app = f"app-{uuid.uuid4().hex[:8]}"
    folder = f"{path}/eventlog_v2_{app}"
    fs.pipe(f"{folder}/appstatus_{app}.inprogress", b"")
    fs.pipe(f"{folder}/events_1_{app}", b'{"Event":"one"}\n')
    mirror = StoreMirror(url, str(tmp_path / "mirror"))
    local = tmp_path / "mirror" / f"eventlog_v2_{app}"
    mirror.sync()
    assert (local / f"events_1_{app}").read_bytes() == b'{"Event":"one"}\n'
    with fs.open(f"{folder}/events_1_{app}", "ab") as f:  # an append store: the part grows
        f.write(b'{"Event":"two"}\n')
    fs.pipe(f"{folder}/events_2_{app}", b'{"Event":"three"}\n')
    fs.pipe(f"{folder}/appstatus_{app}", b"")
    fs.rm_file(f"{folder}/appstatus_{app}.inprogress")
    mirror.sync()
    assert (local / f"events_1_{app}").read_bytes() == b'{"Event":"one"}\n{"Event":"two"}\n'
    assert (local / f"events_2_{app}").read_bytes() == b'{"Event":"three"}\n'
    assert sorted(p.name for p in local.glob("appstatus_*")) == [f"appstatus_{app}"]
    assert mirror.requests == {"list": 2, "get": 3} and not mirror.problems
    fs.rm(path, recursive=True)


def test_the_mirror_splits_shards_and_a_refused_name_harms_no_other_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_state_observer.fleet.log_names import in_shard
    from spark_state_observer.fleet.store_mirror import StoreMirror

    registry = importlib.import_module("fsspec.registry")
    monkeypatch.setitem(registry._registry, "gs", _StoreInMemory.make())
    url = f"gs://bucket-{uuid.uuid4().hex[:8]}/logs"
    fs, path = filesystem(url)
    apps = [f"app-ünï-cödé-{i}" for i in range(8)]
    for app in apps:
        fs.pipe(f"{path}/eventlog_v2_{app}/appstatus_{app}.inprogress", b"")
        fs.pipe(f"{path}/eventlog_v2_{app}/events_1_{app}", app.encode())
    fs.pipe(f"{path}/eventlog_v2_bad/events_1_bad\0name", b"x")  # a key no local file can be named after
    fs.pipe(f"{path}/unrelated/deeper/object", b"x")  # not an event log: never fetched
    mirrored: list[set[str]] = []
    for k in range(2):
        mirror = StoreMirror(url, str(tmp_path / f"shard{k}"), shard=(k, 2))
        mirror.sync()
        mirror.sync()
        got = {p.parent.name.removeprefix("eventlog_v2_") for p in (tmp_path / f"shard{k}").glob("eventlog_v2_*/events_1_*")}
        assert got == {a for a in apps if in_shard(a, (k, 2))}
        assert all((tmp_path / f"shard{k}" / f"eventlog_v2_{a}" / f"events_1_{a}").read_bytes() == a.encode() for a in got)
        assert mirror.requests["get"] == len(got) and mirror.requests["list"] == 2
        assert mirror.problems["error"] == (1 if in_shard("bad", (k, 2)) else 0)  # counted once, not at every poll
        mirrored.append(got)
    assert mirrored[0].isdisjoint(mirrored[1]) and mirrored[0] | mirrored[1] == set(apps)
    fs.rm(path, recursive=True)


def test_a_single_file_log_renamed_at_its_end_stays_one_log_read_on_where_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_state_observer.fleet.store_mirror import StoreMirror

    registry = importlib.import_module("fsspec.registry")
    monkeypatch.setitem(registry._registry, "hdfs", _StoreInMemory.make())
    url = f"hdfs://namenode:8020/logs-{uuid.uuid4().hex[:8]}"
    fs, path = filesystem(url)
    fs.pipe(f"{path}/app-1.inprogress", b"one\n")
    mirror = StoreMirror(url, str(tmp_path / "mirror"))
    mirror.sync()
    fs.pipe(f"{path}/app-1", b"one\ntwo\n")  # the writer closed and renamed it
    fs.rm_file(f"{path}/app-1.inprogress")
    mirror.sync()
    assert sorted(p.name for p in (tmp_path / "mirror").iterdir() if not p.name.startswith(".")) == ["app-1"]
    assert (tmp_path / "mirror" / "app-1").read_bytes() == b"one\ntwo\n"
    assert mirror.requests == {"list": 2, "get": 2} and not mirror.problems  # the second GET: the new bytes only
    fs.rm(path, recursive=True)


def test_the_mirror_stays_bounded_as_applications_come_and_go_and_loses_no_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Waves of applications through one prefix: what the watcher is done with leaves the mirror (and is never
    fetched again); what the store deletes leaves it too. Every batch is delivered once."""
    from test_eventlog_watch import Collector, _expected

    from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
    from spark_state_observer.fleet.store_mirror import StoreMirror
    from spark_state_observer.settings import Settings

    registry = importlib.import_module("fsspec.registry")
    monkeypatch.setitem(registry._registry, "gs", _StoreInMemory.make())
    url = f"gs://bucket-{uuid.uuid4().hex[:8]}/logs"
    fs, path = filesystem(url)
    source = written_log(tmp_path, "local-template")
    parts = sorted(source.glob("events_*"), key=lambda p: int(p.name.split("_")[1]))
    mirror_dir = tmp_path / "mirror"
    mirror = StoreMirror(url, str(mirror_dir))
    fleet = FleetObserver(
        [str(mirror_dir)],
        Settings.from_env(),
        WatchOptions(grace_seconds=0, state_path=str(tmp_path / "w.json")),
        serve=False,
        mirrors=[mirror],
    )
    seen = Collector()
    largest = 0
    try:
        for wave in range(3):
            apps = [f"local-wave{wave}-{i}" for i in range(3)]
            for app in apps:
                fs.pipe(f"{path}/eventlog_v2_{app}/appstatus_{app}.inprogress", b"")
            for part in parts:  # the parts appear one by one, for every application at once
                for app in apps:
                    name = part.name.replace("local-template", app)
                    fs.pipe(f"{path}/eventlog_v2_{app}/{name}", part.read_bytes())
                fleet.poll_once(seen.take)
            for app in apps:
                fs.pipe(f"{path}/eventlog_v2_{app}/appstatus_{app}", b"")
                fs.rm_file(f"{path}/eventlog_v2_{app}/appstatus_{app}.inprogress")
            for _ in range(3):
                fleet.poll_once(seen.take)
                largest = max(largest, sum(f.stat().st_size for f in mirror_dir.rglob("*") if f.is_file()))
            assert not list(mirror_dir.glob("eventlog_v2_*")), "finished logs stay in the mirror"
            if wave == 1:
                fs.rm(f"{path}/eventlog_v2_local-wave0-0", recursive=True)  # the History Server's cleaner
        fleet.poll_once(seen.take)
    finally:
        fleet.stop()
    one_log = sum(p.stat().st_size for p in parts)
    assert largest <= 3 * one_log + 4096  # one wave's logs at most, whatever the number of waves
    assert all(seen.batches[f"local-wave{w}-{i}"] == _expected("rocksdb_restart") for w in range(3) for i in range(3))
    state = json.loads((mirror_dir / ".store-mirror.json").read_text())
    assert len(state["pruned"]) == 8 and "eventlog_v2_local-wave0-0" not in state["pruned"]  # gone from the store: forgotten
    assert mirror.requests["get"] == 9 * len(parts) and not mirror.problems  # nothing fetched twice
    fs.rm(path, recursive=True)


@pytest.mark.parametrize("saved", [b"[1, 2]", b"{not json", b'{"skipped": 7, "pruned": [1], "etags": []}'])
def test_a_damaged_mirror_state_is_a_counted_problem_and_the_mirror_goes_on(
    saved: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_state_observer.fleet.store_mirror import STATE_NAME, StoreMirror

    registry = importlib.import_module("fsspec.registry")
    monkeypatch.setitem(registry._registry, "gs", _StoreInMemory.make())
    url = f"gs://bucket-{uuid.uuid4().hex[:8]}/logs"
    fs, path = filesystem(url)
    fs.pipe(f"{path}/eventlog_v2_app-1/appstatus_app-1.inprogress", b"")
    fs.pipe(f"{path}/eventlog_v2_app-1/events_1_app-1", b'{"Event":"one"}\n')
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / STATE_NAME).write_bytes(saved)
    mirror = StoreMirror(url, str(tmp_path / "mirror"))
    mirror.sync()
    assert (tmp_path / "mirror" / "eventlog_v2_app-1" / "events_1_app-1").read_bytes() == b'{"Event":"one"}\n'
    assert mirror.problems == {"state_file": 1}
    assert json.loads((tmp_path / "mirror" / STATE_NAME).read_text())["skipped"] == []  # saved anew
    fs.rm(path, recursive=True)
