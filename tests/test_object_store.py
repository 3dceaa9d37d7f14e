"""Event logs and checkpoints in an object store: replay and inspect of s3:// and s3a:// URLs on a real s3proxy.

What a URL reads must be what the same files read locally; what goes wrong with the store (no bucket, wrong
credentials, credentials in the URL, a missing extra) is one clear line naming the problem and no secret.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest
from test_inspector import ROCKSDB, checkpoint, operator_metadata, rocksdb_zip

from conftest import FIXTURES, ROOT
from observer.capture.storage import StorageError, filesystem, local_name, redact, staged
from observer.offline.checkpoint import inspect_checkpoint
from observer.offline.checkpoint.store_layout import StageCost, staged_checkpoint


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


def big_snapshot(sst_sizes: list[int], padding: int) -> bytes:
    """A RocksDB snapshot zip: its ``metadata`` member, then a large incompressible member (as SST data would be)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("metadata", zipfile.ZipFile(io.BytesIO(rocksdb_zip(sst_sizes))).read("metadata"))
        z.writestr("000001.sst", os.urandom(padding))
    return out.getvalue()


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
    # snapshots: one with a large member after its metadata (only the metadata and the zip's directory are read),
    # one whose directory is cut off, one that is no zip at all; each judged as the local file is
    (root / "state" / "0" / "0" / "1.zip").write_bytes(big_snapshot([1000, 2000], 3 << 20))
    (root / "state" / "0" / "1" / "1.zip").write_bytes(big_snapshot([5], 1 << 20)[:-30])
    (root / "state" / "0" / "1" / "2.zip").write_bytes(os.urandom(70_000))
    fs, name = bucket()
    fs.put(str(root), f"{name}/checkpoints/q1", recursive=True)
    fs.call_s3("put_object", Bucket=name, Key="checkpoints/q1/state/0/0/", Body=b"")  # a folder marker, as s3a writes them
    url = f"s3a://{name}/checkpoints/q1"
    cost = StageCost()
    with staged_checkpoint(url, cost) as layout:
        laid_out = inspect_checkpoint(layout).to_json().replace(layout, str(root))
    assert json.loads(laid_out) == json.loads(inspect_checkpoint(str(root)).to_json())
    assert "not a zip file" in laid_out  # the random 2.zip, judged from its tail as the local file is
    assert cost.objects == len([p for p in root.rglob("*") if p.is_file()])
    assert cost.bytes_listed > 4 << 20 and cost.bytes_read < 300_000, cost  # sizes listed, snapshots not downloaded
    assert '"snapshot_bytes": ' + str(len(big_snapshot([1000, 2000], 3 << 20)) + 3000) in laid_out  # its SST list was read
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

    from observer.fleet.eventlog_watch import EventLogWatcher
    from observer.fleet.store_mirror import StoreMirror

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
    from observer.fleet.store_mirror import StoreMirror

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
    from observer.fleet.log_names import in_shard
    from observer.fleet.store_mirror import StoreMirror

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
    from observer.fleet.store_mirror import StoreMirror

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

    from observer.fleet.runtime import FleetObserver, WatchOptions
    from observer.fleet.store_mirror import StoreMirror
    from observer.settings import Settings

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


class _AnsweringErrors:
    """A loopback HTTP server that answers every S3 request with one error document (a store in trouble)."""

    def __init__(self, status: int, code: str) -> None:
        import http.server
        import threading

        body = f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>{code}</Message></Error>".encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_HEAD = do_PUT = do_POST = _answer  # noqa: N815  (http.server's names)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.slow
def test_an_overwritten_part_a_vanished_bucket_and_error_answers_are_counted_and_never_read(
    s3_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from observer.fleet.store_mirror import StoreMirror

    app = "local-s3faults"
    parts = sorted(written_log(tmp_path, app).glob("events_*"), key=lambda p: int(p.name.split("_")[1]))
    fs, name = bucket()
    prefix = f"{name}/eventlogs/eventlog_v2_{app}"
    fs.pipe(f"{prefix}/appstatus_{app}.inprogress", b"")
    fs.put_file(str(parts[0]), f"{prefix}/{parts[0].name}")
    mirror = StoreMirror(f"s3://{name}/eventlogs", str(tmp_path / "mirror"))
    copy = tmp_path / "mirror" / f"eventlog_v2_{app}" / parts[0].name
    mirror.sync()
    assert copy.read_bytes() == parts[0].read_bytes()
    fs.pipe(f"{prefix}/{parts[0].name}", b"x" * (parts[0].stat().st_size + 10))  # rewritten in place, larger
    fs.put_file(str(parts[1]), f"{prefix}/{parts[1].name}")
    mirror.sync()
    mirror.sync()
    assert mirror.problems["overwritten"] == 1  # counted once, its new bytes never appended to what was read
    assert copy.read_bytes() == parts[0].read_bytes() and (copy.parent / parts[1].name).read_bytes() == parts[1].read_bytes()
    for key in fs.find(name):  # the bucket vanishes mid-run
        fs.rm_file(key)
    fs.call_s3("delete_bucket", Bucket=name)
    before = mirror.requests["get"]
    mirror.sync()
    mirror.sync()
    assert mirror.problems["not_found"] == 2 and mirror.requests["get"] == before
    assert copy.read_bytes() == parts[0].read_bytes()  # what was mirrored stays: the watcher keeps serving it

    for status, code, kind in ((503, "SlowDown", "throttled"), (500, "InternalError", "error")):
        store = _AnsweringErrors(status, code)
        try:
            monkeypatch.setenv("AWS_ENDPOINT_URL", store.url)
            failing = StoreMirror(f"s3://{name}/eventlogs", str(tmp_path / f"failing-{status}"))
            failing.sync()
            assert failing.problems[kind] == 1 and sum(failing.problems.values()) == 1, failing.problems
            assert not [p for p in (tmp_path / f"failing-{status}").iterdir() if not p.name.startswith(".")]
        finally:
            store.stop()


@pytest.mark.parametrize("saved", [b"[1, 2]", b"{not json", b'{"skipped": 7, "pruned": [1], "etags": []}'])
def test_a_damaged_mirror_state_is_a_counted_problem_and_the_mirror_goes_on(
    saved: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from observer.fleet.store_mirror import STATE_NAME, StoreMirror

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
