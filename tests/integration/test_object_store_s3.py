"""Event logs and checkpoints in a real S3-compatible store (s3proxy): replay, inspect and watch equal their local runs,
and store failures are one clear line."""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest
from test_inspector import ROCKSDB, checkpoint, operator_metadata, rocksdb_zip
from test_object_store import bucket, cli, written_log

from conftest import FIXTURES
from spark_state_observer.capture.storage import StorageError, staged
from spark_state_observer.offline.checkpoint import inspect_checkpoint
from spark_state_observer.offline.checkpoint.store_layout import StageCost, staged_checkpoint


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


@pytest.mark.slow
def test_watch_follows_a_rolling_log_in_s3_part_by_part(s3_server: Any, tmp_path: Path) -> None:
    from test_eventlog_watch import Collector, _expected

    from spark_state_observer.fleet.eventlog_watch import EventLogWatcher
    from spark_state_observer.fleet.store_mirror import StoreMirror

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


def big_snapshot(sst_sizes: list[int], padding: int) -> bytes:
    """A RocksDB snapshot zip: its ``metadata`` member, then a large incompressible member (as SST data would be)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("metadata", zipfile.ZipFile(io.BytesIO(rocksdb_zip(sst_sizes))).read("metadata"))
        z.writestr("000001.sst", os.urandom(padding))
    return out.getvalue()


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
    from spark_state_observer.fleet.store_mirror import StoreMirror

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
