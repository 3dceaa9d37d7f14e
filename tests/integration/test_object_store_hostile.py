"""Object stores that are hostile or unlucky (issue 48), on a real S3-compatible server (s3proxy) and on loopback
endpoints that misbehave (``tests/support/hostile_stores.py``): corrupted checkpoints are caught over S3 as
locally, a hostile key harms only its own log, a store that hangs never holds local folders, listings and
objects cost bounded memory, and no secret is printed."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hostile_stores import Blackhole, EndlessListing
from test_object_store import bucket, cli, written_log
from test_object_store_s3 import _AnsweringErrors

from conftest import FIXTURES

V2 = os.path.join(FIXTURES, "snapshot_health", "format_v2", "checkpoint")


def _trimmed(into: Path) -> Path:
    """The recorded v2 checkpoint with the state of its first two partitions only (fewer objects to send and read)."""
    shutil.copytree(V2, into)
    for partition in into.glob("state/*/*"):
        if partition.is_dir() and partition.name not in ("0", "1", "_metadata"):
            shutil.rmtree(partition)
    return into


def _corrupted(tmp_path: Path) -> tuple[Path, str]:
    """A trimmed copy of the recorded v2 checkpoint with one changelog byte flipped (its size kept): (root, victim)."""
    root = _trimmed(tmp_path / "ck")
    victim = sorted(p for p in root.rglob("*.changelog") if not p.name.startswith("."))[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(data)
    return root, str(victim.relative_to(root))


@pytest.mark.slow
def test_verify_checksums_over_s3_reads_the_real_bytes_and_finds_what_it_finds_locally(s3_server: Any, tmp_path: Path) -> None:
    root, victim = _corrupted(tmp_path)
    clean = _trimmed(tmp_path / "clean")
    fs, name = bucket()
    fs.put(str(root), f"{name}/ck", recursive=True)
    fs.put(str(clean), f"{name}/clean", recursive=True)
    url = f"s3://{name}/ck"
    local = cli(["inspect", "--json", "--verify-checksums", str(root)])
    remote = cli(["inspect", "--json", "--verify-checksums", url])
    assert local.returncode == 1 and remote.returncode == 1, remote.stderr
    here, there = json.loads(local.stdout)["checksums"], json.loads(remote.stdout)["checksums"]
    assert len(there["mismatches"]) == 1 and there["mismatches"][0].startswith(f"{url}/{victim}") and "CRC32C" in there["mismatches"][0]
    assert there["checked"] == here["checked"] > 20 and there["unreadable"] == [] == here["unreadable"]
    # plain inspect: the changelogs' lineage headers are read from the store, not the layout's zeros
    plain = cli(["inspect", "--json", "--verify-checksums", f"s3://{name}/clean"])
    alone = cli(["inspect", "--json", str(clean)])
    assert plain.returncode == 0 and json.loads(plain.stdout)["checksums"]["mismatches"] == [], plain.stderr
    assert json.loads(plain.stdout)["problems"] == [
        p.replace(str(clean), f"s3://{name}/clean") for p in json.loads(alone.stdout)["problems"]
    ]
    assert "lz4-java" not in plain.stdout
    # a checksum file that cannot be read: said, and not a pass
    crc = sorted(k for k in fs.find(f"{name}/clean") if k.endswith(".changelog.crc"))[0]
    fs.pipe(crc, b"{not a checksum")
    out = cli(["inspect", "--verify-checksums", f"s3://{name}/clean"])
    assert out.returncode == 1 and "1 could not be verified" in out.stdout and "could not be verified" in out.stderr, out.stderr


@pytest.mark.slow
def test_keys_the_local_disk_refuses_are_skipped_and_said_and_the_rest_is_read(s3_server: Any, tmp_path: Path) -> None:
    from spark_state_observer.capture.storage import staged_all

    fs, name = bucket()
    run = os.path.join(FIXTURES, "rocksdb_plain_log", "run1", "eventlog")
    fs.put(run, f"{name}/logs/eventlog", recursive=True)
    fs.pipe(f"{name}/logs/x", b"{}\n")
    fs.pipe(f"{name}/logs/x/y", b"{}\n")  # a key that is also a folder
    fs.pipe(f"{name}/logs/{'k' * 300}", b"{}\n")  # a name no local disk takes
    fs.pipe(f"{name}/logs/eventlog/.hidden-big", b"z" * 100_000)  # nothing an event-log reader opens
    out = cli(["replay", f"s3://{name}/logs"])
    assert out.returncode == 0 and "batch" in out.stdout, out.stderr
    assert out.stderr.count("skipped, the local disk cannot hold it") == 2 and "Traceback" not in out.stderr
    notes: list[str] = []
    with staged_all([f"s3://{name}/logs"], notes) as (paths, _):
        copied = sorted(str(p.relative_to(paths[0])) for p in Path(paths[0]).rglob("*") if p.is_file())
    assert all(".hidden" not in c and "appstatus" not in c for c in copied) and "x" in copied
    ck, _ = _corrupted(tmp_path)
    fs.put(str(ck), f"{name}/ck", recursive=True)
    fs.pipe(f"{name}/ck/state/0/{'s' * 300}", b"x")
    fs.pipe(f"{name}/ck/offsets/9/y", b"x")  # offsets/9 does not exist as an object, but a key under it does
    fs.pipe(f"{name}/ck/commits/0/z", b"x")  # commits/0 is an object and a folder
    inspected = cli(["inspect", "--json", f"s3://{name}/ck"])
    assert inspected.returncode == 0 and json.loads(inspected.stdout)["last_committed_batch"] is not None, inspected.stderr
    assert "the local disk cannot hold it" in inspected.stderr and "Traceback" not in inspected.stderr


@pytest.mark.slow
def test_a_long_application_id_is_its_own_log_and_blinds_no_other(s3_server: Any, tmp_path: Path) -> None:
    from test_eventlog_watch import Collector, _expected

    from spark_state_observer.fleet.eventlog_watch import EventLogWatcher
    from spark_state_observer.fleet.store_mirror import StoreMirror

    fs, name = bucket()
    long_app = "local-" + "l" * 250
    for app, source in (("local-short", "local-short"), (long_app, "local-long")):
        folder = written_log(tmp_path / source, source)
        for part in folder.iterdir():
            fs.put_file(str(part), f"{name}/logs/eventlog_v2_{app}/{part.name.replace(source, app)}")
    mirror = StoreMirror(f"s3://{name}/logs", str(tmp_path / "mirror"), read_finished_at_start=True)
    watcher = EventLogWatcher([str(tmp_path / "mirror")], grace_seconds=3600, read_finished_at_start=True)
    seen = Collector()
    mirror.sync()
    mirror.sync()
    seen.poll(watcher, 3)
    assert mirror.problems["long_name"] == 1 and sum(mirror.problems.values()) == 1, mirror.problems
    assert sorted(len(b) for b in seen.batches.values()) == [len(_expected("rocksdb_restart"))] * 2
    assert all(len(p.name.encode()) <= 255 for p in (tmp_path / "mirror").rglob("*"))


@pytest.mark.slow
def test_watch_serves_local_folders_while_a_store_hangs(tmp_path: Path) -> None:
    from test_fleet import Watch, value

    hole = Blackhole()
    local = tmp_path / "local"
    shutil.copytree(os.path.join(FIXTURES, "rocksdb_restart", "run1", "eventlog"), local)
    saved = dict(os.environ)
    os.environ.update(
        {"AWS_ENDPOINT_URL": hole.url, "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b", "AWS_DEFAULT_REGION": "us-east-1"}
    )
    try:
        watch = Watch(str(tmp_path), [str(local), "s3://bkt/logs?token=SECRET-QUERY#SECRET-FRAG", "--read-finished"])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        # the local application is read while the store's first request still hangs (it fails after its timeouts)
        series = watch.wait("local batches", lambda s: (value(s, "spark_streaming_batches_total") or 0) > 0)
        assert not value(series, "spark_state_observer_watch_store_problems_total", kind="unreachable")
        watch.wait(
            "the store counted unreachable",
            lambda s: (value(s, "spark_state_observer_watch_store_problems_total", kind="unreachable") or 0) >= 1,
        )
    finally:
        assert watch.stop() == 0
        hole.stop()
    assert "SECRET" not in watch.stderr() and "s3://bkt/logs?<redacted>" in watch.stderr()


@pytest.mark.parametrize(
    "command, url, endpoint",
    [
        ("inspect", "s3://SECRET-USER@bkt/ck", None),
        ("replay", "s3://AKIA:SECRET-PASS@bkt/ck", None),
        ("inspect", "s3://bkt/ck?token=SECRET-Q", "http://127.0.0.1:9"),
        ("replay", "s3://bkt/ck#SECRET-FRAG", "http://127.0.0.1:9"),
        ("inspect", "abfss://c@acct.dfs.core.windows.net/ck?sv=1&sig=SECRET-SIG", None),
        ("replay", "s3://bkt/ck", "http://127.0.0.1:9/?X-Amz-Security-Token=SECRET-TOKEN"),
    ],
)
def test_no_secret_in_any_form_reaches_stderr(command: str, url: str, endpoint: str | None) -> None:
    env = {"AWS_ENDPOINT_URL": endpoint} if endpoint else {}
    out = cli([command, url], env={"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b", "AWS_DEFAULT_REGION": "us-east-1", **env})
    assert out.returncode == 2 and "SECRET" not in out.stderr + out.stdout and "Traceback" not in out.stderr, out.stderr


@pytest.mark.slow
def test_an_endless_listing_is_read_in_bounded_pages_and_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_state_observer.capture.storage import StorageError, filesystem, find
    from spark_state_observer.fleet import store_mirror

    store = EndlessListing()
    monkeypatch.setenv("AWS_ENDPOINT_URL", store.url)
    for key, val in (("AWS_ACCESS_KEY_ID", "a"), ("AWS_SECRET_ACCESS_KEY", "b"), ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(key, val)
    monkeypatch.setattr(store_mirror, "LIST_PAGES", 3)
    monkeypatch.setattr(store_mirror, "MAX_KEYS", 7_000)
    try:
        mirror = store_mirror.StoreMirror("s3://bkt/logs", str(tmp_path / "mirror"))
        for _ in range(4):
            before = store.pages[0]
            mirror.sync()
            assert store.pages[0] - before <= 3 and len(mirror._partial) <= 7_000
        assert mirror.problems["listing"] == 1 and store.pages[0] == 10  # cut at 7,000 keys (the tenth page), once
        fs, path = filesystem("s3://bkt/ck")
        with pytest.raises(StorageError, match="more than 3000 objects") as info:
            find(fs, path, limit=3000)
        assert info.value.kind == "listing"
    finally:
        store.stop()


@pytest.mark.slow
def test_a_large_object_is_fetched_in_bounded_ranged_gets(s3_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_state_observer.fleet import store_mirror

    monkeypatch.setattr(store_mirror, "GET_CHUNK", 256 << 10)
    fs, name = bucket()
    data = os.urandom(1 << 20) + b"\n"
    fs.pipe(f"{name}/logs/app-1.inprogress", data)
    mirror = store_mirror.StoreMirror(f"s3://{name}/logs", str(tmp_path / "mirror"))
    mirror.sync()
    assert (tmp_path / "mirror" / "app-1.inprogress").read_bytes() == data
    assert mirror.requests["get"] == 5 and not mirror.problems  # 4 x 256 KiB and the last byte, never the whole at once
    assert not [p for p in (tmp_path / "mirror").iterdir() if p.name.startswith(".fetch-")]


@pytest.mark.slow
def test_a_503_storm_is_throttling(s3_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_state_observer.fleet.store_mirror import StoreMirror

    store = _AnsweringErrors(503, "ServiceUnavailable")
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", store.url)
        mirror = StoreMirror("s3://bkt/logs", str(tmp_path / "mirror"))
        mirror.sync()
        assert mirror.problems == {"throttled": 1}
    finally:
        store.stop()
