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
from test_inspector import ROCKSDB, checkpoint, operator_metadata

from conftest import FIXTURES, ROOT
from observer.capture.storage import StorageError, _local_name, filesystem, redact, staged


def cli(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "observer.cli", *args],
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
    assert _local_name("/tmp/copy", "/a/b") == os.path.join("/tmp/copy", "a", "b")
    assert _local_name("/tmp/copy", "/a/../../etc/passwd") is None
    assert _local_name("/tmp/copy", "/./x") is None
    assert _local_name("/tmp/copy", "/ünï cödé/ключ") == os.path.join("/tmp/copy", "ünï cödé", "ключ")


@pytest.mark.skipif(importlib.util.find_spec("gcsfs") is not None, reason="gcsfs is installed: the extra is not missing")
def test_a_missing_extra_names_the_extra_to_install() -> None:
    with pytest.raises(StorageError, match=r"pip install 'spark-state-observer\[gcs\]'") as info:
        filesystem("gs://bucket/logs")
    assert info.value.kind == "missing_extra"
    proc = cli(["replay", "gs://bucket/logs"])
    assert proc.returncode == 2 and "spark-state-observer[gcs]" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_replay_of_event_logs_in_s3_equals_replay_of_the_same_files(s3_server: Any) -> None:
    fs, name = bucket()
    run = os.path.join(FIXTURES, "rocksdb_plain_log", "run1", "eventlog")
    fs.put(run, f"{name}/logs/eventlog", recursive=True)  # the same name: the log's name is on the application's series
    for form, scheme in (("summary", "s3"), ("prometheus", "s3a")):
        local = cli(["replay", "--format", form, run])
        assert local.returncode == 0, local.stderr
        remote = cli(["replay", "--format", form, f"{scheme}://{name}/logs/eventlog"])
        assert remote.returncode == 0, remote.stderr
        assert of_the_job(remote.stdout) == of_the_job(local.stdout) and "batch" in remote.stdout


def of_the_job(text: str) -> list[str]:
    """What replay says of the job, less the observer's timings of itself (they differ between any two runs)."""
    return [line for line in text.splitlines() if "spark_state_observer_" not in line]


@pytest.mark.slow
def test_inspect_of_a_checkpoint_in_s3_equals_inspect_of_the_same_folder(s3_server: Any, tmp_path: Path) -> None:
    root = checkpoint(tmp_path / "ck", ROCKSDB, committed=3, planned=4)
    operator_metadata(root, 0, "stateStoreSave", ["default"])
    for partition in range(2):
        (root / "state" / "0" / str(partition)).mkdir(parents=True)
        (root / "state" / "0" / str(partition) / "2.changelog").write_bytes(b"x" * (100 + partition))
    fs, name = bucket()
    fs.put(str(root), f"{name}/checkpoints/q1", recursive=True)
    url = f"s3a://{name}/checkpoints/q1"
    local = cli(["inspect", "--json", str(root)])
    remote = cli(["inspect", "--json", url])
    assert local.returncode == 0 and remote.returncode == 0, (local.stderr, remote.stderr)
    # the same report, naming the URL where the local one names the folder (its problems too)
    assert json.loads(remote.stdout) == json.loads(local.stdout.replace(str(root), url))
    assert json.loads(remote.stdout)["last_committed_batch"] == 3 and url in remote.stdout
    text = cli(["inspect", url])
    assert text.returncode == 0 and text.stdout == cli(["inspect", str(root)]).stdout.replace(str(root), url)


@pytest.mark.slow
def test_store_failures_are_one_clear_line_without_secrets(s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fs, name = bucket()
    fs.pipe(f"{name}/logs/events_1_app", b"{}\n")
    with staged(f"s3://{name}/logs/events_1_app") as one:  # a single object is copied as a file
        assert Path(one).read_bytes() == b"{}\n"
    with pytest.raises(StorageError, match="not found") as info, staged(f"s3://{name}-absent/logs"):
        pass
    assert info.value.kind == "not_found"
    with monkeypatch.context() as env:
        env.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        with pytest.raises(StorageError, match="cannot be reached") as info, staged(f"s3://{name}/logs"):
            pass
        assert info.value.kind == "unreachable"
    wrong = cli(["replay", f"s3://{name}/logs"], env={"AWS_SECRET_ACCESS_KEY": "not-the-secret"})
    assert wrong.returncode == 2 and "access denied" in wrong.stderr and "Traceback" not in wrong.stderr
    assert "not-the-secret" not in wrong.stderr
    in_url = cli(["inspect", f"s3://AKIA:topsecret@{name}/ck"])
    assert in_url.returncode == 2 and "credentials in a URL are refused" in in_url.stderr and "topsecret" not in in_url.stderr


def written_log(tmp_path: Path, app_id: str) -> Path:
    """A recorded real Spark log (zstd) written as Spark rolls it, in small parts: its eventlog_v2_ folder."""
    from test_eventlog_watch import _source

    from bench.eventlog_writer import ProgressiveLog, recorded_lines

    log = ProgressiveLog(str(tmp_path / "written"), app_id, "zstd", max_file_bytes=16 << 10)
    for _ in log.steps(recorded_lines(_source("rocksdb_restart"))):
        pass
    log.finish()
    return Path(log.dir)


@pytest.mark.slow
def test_watch_follows_a_rolling_log_in_s3_part_by_part(s3_server: Any, tmp_path: Path) -> None:
    from test_eventlog_watch import Collector, _expected

    from observer.capture.eventlog_watch import EventLogWatcher
    from observer.capture.store_mirror import StoreMirror

    app = "local-s3follow"
    folder = written_log(tmp_path, app)
    parts = sorted((int(p.name.split("_")[1]), p) for p in folder.glob("events_*"))
    assert len(parts) >= 6
    fs, name = bucket()
    prefix = f"{name}/eventlogs/eventlog_v2_{app}"
    fs.pipe(f"{prefix}/appstatus_{app}.inprogress", b"")  # s3a writes each object when Spark closes it
    mirror_dir, state = str(tmp_path / "mirror"), str(tmp_path / "state.json")
    url = f"s3a://{name}/eventlogs"

    def start() -> tuple[StoreMirror, EventLogWatcher]:
        return StoreMirror(url, mirror_dir), EventLogWatcher([mirror_dir], state_path=state, grace_seconds=3600)

    mirror, watcher = start()
    seen = Collector()

    def poll(expect_gets: int) -> None:
        before = dict(mirror.requests)
        mirror.sync()
        seen.poll(watcher)
        sent = {k: mirror.requests[k] - before.get(k, 0) for k in mirror.requests}
        assert sent.get("list", 0) == 1 and sent.get("get", 0) == expect_gets and sent.get("head", 0) == 0, sent

    def upload(index: int) -> None:
        fs.put_file(str(dict(parts)[index]), f"{prefix}/{dict(parts)[index].name}")

    upload(1)
    poll(expect_gets=1)
    poll(expect_gets=0)  # nothing new: one LIST, no GET
    first = list(seen.batches.get(app, []))
    upload(3)  # part 2 not visible yet: part 3 waits, the watcher never skips an index
    poll(expect_gets=0)
    assert mirror.problems["gap"] == 1 and seen.batches.get(app, []) == first
    upload(2)
    poll(expect_gets=2)
    upload(4)
    poll(expect_gets=1)
    watcher.commit()
    mirror, watcher = start()  # a restart: positions by object and part, nothing fetched or delivered twice
    poll(expect_gets=0)
    for index, _ in parts[4:]:
        upload(index)
    fs.put_file(str(folder / f"appstatus_{app}"), f"{prefix}/appstatus_{app}")
    fs.rm_file(f"{prefix}/appstatus_{app}.inprogress")
    poll(expect_gets=len(parts) - 4)
    seen.poll(watcher, 2)
    assert seen.batches[app] == _expected("rocksdb_restart")  # every batch once, in order
    assert "finished" in seen.statuses[app]
    assert not [p for p in seen.problems[app] if "truncated" in p or "corrupt" in p]


@pytest.mark.slow
def test_watch_command_serves_an_s3_prefix_and_keeps_serving_when_the_store_refuses(s3_server: Any, tmp_path: Path) -> None:
    from test_eventlog_watch import _expected
    from test_fleet import Watch, value

    app = "local-s3cli"
    folder = written_log(tmp_path, app)
    fs, name = bucket()
    fs.put(str(folder), f"{name}/events/{folder.name}", recursive=True)
    url = f"s3a://{name}/events"
    good = Watch(str(tmp_path), [url, "--read-finished"])
    os.environ["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"  # the refused watcher's environment only
    try:
        refused = Watch(str(tmp_path), [url])
    finally:
        os.environ["AWS_SECRET_ACCESS_KEY"] = s3_server.env["AWS_SECRET_ACCESS_KEY"]
    try:
        batches = len(_expected("rocksdb_restart"))
        series = good.wait("every batch", lambda s: value(s, "spark_streaming_batches_total") == batches)
        assert value(series, "spark_state_observer_watch_store_requests_total", kind="get") == len(list(folder.glob("events_*")))
        assert value(series, "spark_state_observer_watch_store_problems_total", kind="denied") == 0
        series = refused.wait(
            "denied, counted", lambda s: (value(s, "spark_state_observer_watch_store_problems_total", kind="denied") or 0) >= 2
        )
        assert value(series, "spark_state_observer_watch_store_requests_total", kind="get") == 0
        assert "access denied" in refused.stderr() and "not-the-secret" not in refused.stderr() and "Traceback" not in refused.stderr()
    finally:
        assert good.stop() == 0 and refused.stop() == 0


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
    from observer.capture.store_mirror import StoreMirror

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
    from observer.capture.eventlog_watch import in_shard
    from observer.capture.store_mirror import StoreMirror

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
    from observer.capture.store_mirror import StoreMirror

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
