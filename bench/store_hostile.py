"""Object stores that misbehave: what each case costs the watcher and the inspector (issue 48).

    python bench/store_hostile.py CASE [CASE ...]     (CASE: blackhole, endless, big, keys, crc; default all)

Run with PYTHONPATH pointing at the tree to measure (a checkout before the change, then after). A real
S3-compatible server (s3proxy, as in the tests: bash scripts/fetch_s3proxy.sh) serves the healthy cases;
``tests/support/hostile_stores.py`` the hostile ones, on loopback:

- ``blackhole``: ``watch LOCAL s3://...`` where the endpoint accepts and never answers: seconds until the local
  folder's recorded application shows all its batches on ``/metrics``; seconds a lone sync takes to fail.
- ``endless``: ``watch s3://...`` and ``inspect s3://...`` against a listing that never ends: RSS after 20, 40
  and 90 s (MB), and whether the command ended.
- ``big``: one sync of a 96 MB single-file log (``app.inprogress``): the process's peak RSS (``/usr/bin/time -v``).
- ``keys``: 20,000 keys (10,000 finished rolling logs) under the prefix, synced every second for 30 s: CPU
  seconds per wall second (cores) and LIST requests sent.
- ``crc``: CRC32C MB/s, pure Python and with ``google-crc32c`` where installed.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SUPPORT = os.path.join(HERE, "..", "tests", "support")
sys.path.insert(0, SUPPORT)
TREE = os.environ.get("PYTHONPATH", os.path.join(HERE, ".."))
FIXTURE = os.path.join(HERE, "..", "tests", "fixtures", "rocksdb_restart")  # a query's two runs


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    return 0.0


def _env(endpoint: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": TREE,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": os.environ.get("AWS_ACCESS_KEY_ID", "a"),
        "AWS_SECRET_ACCESS_KEY": os.environ.get("AWS_SECRET_ACCESS_KEY", "b"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
        "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
    }


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _batches(port: int) -> float:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return -1
    return sum(float(m.group(1)) for m in re.finditer(r"^spark_streaming_batches_total\{[^}]*\} (\S+)$", text, re.M))


def _watch_until(local: str, extra: list[str], env: dict[str, str], tmp: str, target: float | None) -> tuple[float, float]:
    """Run ``watch local extra``: (batches on /metrics, seconds until ``target``, or until stable for 3 s)."""
    port = _free_port()
    cmd = [sys.executable, "-m", "spark_state_observer.cli", "watch", local, *extra, "--port", str(port), "--read-finished"]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
    seen, at, since = -1.0, 60.0, time.monotonic()
    try:
        while time.monotonic() - started < 60:
            now = _batches(port)
            if now != seen:
                seen, since = now, time.monotonic()
            if target is not None and seen >= target:
                at = time.monotonic() - started
                break
            if target is None and seen > 0 and time.monotonic() - since > 3:
                at = since - started
                break
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(60)
    return seen, at


def blackhole() -> None:
    from hostile_stores import Blackhole

    hole = Blackhole()
    tmp = tempfile.mkdtemp(prefix="sso-bench-hole-")
    try:
        local = os.path.join(tmp, "local")
        for run in ("run1", "run2"):
            shutil.copytree(os.path.join(FIXTURE, run, "eventlog"), local, dirs_exist_ok=True)
        alone, alone_at = _watch_until(local, [], _env(hole.url), tmp, None)
        shutil.rmtree(os.path.join(tmp, "local"))
        for run in ("run1", "run2"):
            shutil.copytree(os.path.join(FIXTURE, run, "eventlog"), local, dirs_exist_ok=True)
        seen, at = _watch_until(local, ["s3://bkt/logs"], _env(hole.url), tmp, alone)
        print(
            f"blackhole: the local folder alone: {alone:.0f} batches after {alone_at:.1f} s; beside a blackholed store: {seen:.0f} after {at:.1f} s"
        )
        code = (
            "import tempfile,time;from spark_state_observer.fleet.store_mirror import StoreMirror;"
            "m=StoreMirror('s3://bkt/logs',tempfile.mkdtemp());t=time.monotonic();m.sync();print(f'{time.monotonic()-t:.1f}',dict(m.problems))"
        )
        out = subprocess.run([sys.executable, "-c", code], env=_env(hole.url), capture_output=True, text=True, timeout=300, cwd=tmp)
        print(f"blackhole: one sync fails after {out.stdout.strip()} s")
    finally:
        hole.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def endless() -> None:
    from hostile_stores import EndlessListing

    store = EndlessListing()
    tmp = tempfile.mkdtemp(prefix="sso-bench-endless-")
    try:
        for name, args in (
            ("watch", ["watch", "s3://bkt/logs", "--port", str(_free_port())]),
            ("inspect", ["inspect", "s3://bkt/ck"]),
        ):
            proc = subprocess.Popen(
                [sys.executable, "-m", "spark_state_observer.cli", *args],
                env=_env(store.url),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                cwd=tmp,
            )
            rss = []
            for wait in (20, 20, 50):
                deadline = time.monotonic() + wait
                while time.monotonic() < deadline and proc.poll() is None:
                    time.sleep(0.2)
                rss.append(_rss_mb(proc.pid))
            ended = proc.poll()
            if ended is None:
                proc.terminate()
            try:
                _, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            last = (err or "").strip().splitlines()[-1:] or [""]
            print(
                f"endless: {name}: RSS {rss[0]:.0f} MB at 20 s, {rss[1]:.0f} MB at 40 s, {rss[2]:.0f} MB at 90 s; "
                f"ended by itself: {ended is not None} (exit {ended}); {last[0][:160]}; pages served {store.pages[0]}"
            )
            store.pages[0] = 0
    finally:
        store.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _with_s3proxy(run: object) -> None:
    from s3_server import JAR_DIR, S3Server

    jars = sorted(glob.glob(os.path.join(JAR_DIR, "s3proxy-*.jar")))
    if not jars:
        sys.exit(f"s3proxy is not in {JAR_DIR}: bash scripts/fetch_s3proxy.sh")
    root = tempfile.mkdtemp(prefix="sso-bench-s3-")
    server = S3Server(jars[-1], root)
    os.environ.update(server.env)
    try:
        run(server.endpoint, root)  # type: ignore[operator]
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def big() -> None:
    def run(endpoint: str, root: str) -> None:
        import s3fs

        fs = s3fs.S3FileSystem(skip_instance_cache=True)
        fs.call_s3("create_bucket", Bucket="big")
        size = 96 << 20  # (s3proxy keeps objects in its 512 MB heap: larger PUTs run out of it)
        line = b'{"Event":"SparkListenerLogStart","Spark Version":"4.0.0"}\n'
        data = line * (size // len(line))
        written = len(data)
        fs.pipe_file("big/logs/app-1.inprogress", data)
        del data
        code = "import sys;from spark_state_observer.fleet.store_mirror import StoreMirror;m=StoreMirror('s3://big/logs',sys.argv[1]);m.sync();print(dict(m.requests),dict(m.problems))"
        out = subprocess.run(
            ["/usr/bin/time", "-v", sys.executable, "-c", code, os.path.join(root, "mirror")],
            env=_env(endpoint),
            capture_output=True,
            text=True,
            timeout=600,
            cwd=root,
        )
        peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr)
        target = os.path.join(root, "mirror", "app-1.inprogress")
        mirrored = os.path.getsize(target) if os.path.exists(target) else 0
        print(
            f"big: {written >> 20} MB object: peak RSS {int(peak.group(1)) / 1024 if peak else -1:.0f} MB; mirrored {mirrored >> 20} MB; "
            f"{out.stdout.strip()}{'' if out.returncode == 0 else ' ' + out.stderr.strip()[-300:]}"
        )

    _with_s3proxy(run)


def keys() -> None:
    def run(endpoint: str, root: str) -> None:
        import s3fs

        fs = s3fs.S3FileSystem(skip_instance_cache=True)
        fs.call_s3("create_bucket", Bucket="keys")
        objects = {}
        for i in range(10_000):
            app = f"app-20261126{i:06d}-0001"
            objects[f"keys/logs/eventlog_v2_{app}/appstatus_{app}"] = b""
            objects[f"keys/logs/eventlog_v2_{app}/events_1_{app}"] = b"{}\n"
        items = list(objects.items())
        for i in range(0, len(items), 500):
            fs.pipe(dict(items[i : i + 500]))
        code = (
            "import sys,time,resource;from spark_state_observer.fleet.store_mirror import StoreMirror;"
            "m=StoreMirror('s3://keys/logs',sys.argv[1]);t=time.monotonic();c=time.process_time();m.sync();"
            "print(f'first sync {time.monotonic()-t:.2f} s, {time.process_time()-c:.2f} s CPU;', end=' ')\n"
            "r0=resource.getrusage(resource.RUSAGE_SELF);c0=r0.ru_utime+r0.ru_stime;t0=time.monotonic();l0=m.requests['list']\n"
            "while time.monotonic()-t0<30:\n s=time.monotonic();m.sync();time.sleep(max(0,1-(time.monotonic()-s)))\n"
            "r=resource.getrusage(resource.RUSAGE_SELF);print(f'{(r.ru_utime+r.ru_stime-c0)/(time.monotonic()-t0):.3f} cores, {m.requests[\"list\"]-l0} LIST pages in 30 s')"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, os.path.join(root, "mirror")],
            env=_env(endpoint),
            capture_output=True,
            text=True,
            timeout=600,
            cwd=root,
        )
        print(f"keys: 20,000 keys synced every second for 30 s: {out.stdout.strip()} {out.stderr.strip()[-300:]}")

    _with_s3proxy(run)


def crc() -> None:
    code = (
        "import os,time;from spark_state_observer.offline.checkpoint import checksums as c;data=os.urandom(8<<20)\n"
        "t=time.perf_counter();c.crc32c_python(data) if hasattr(c,'crc32c_python') else c.crc32c(data);py=8/(time.perf_counter()-t)\n"
        "t=time.perf_counter();[c.crc32c(data) for _ in range(16)];fast=128/(time.perf_counter()-t)\n"
        "print(json.dumps({'python_mb_s':round(py,1),'crc32c_mb_s':round(fast,1),'c':getattr(c,'_c',None) is not None}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json\n" + code], env=_env(""), capture_output=True, text=True, timeout=600, cwd=tempfile.gettempdir()
    )
    print(f"crc: {out.stdout.strip() or out.stderr.strip()[-300:]}")


CASES = {"blackhole": blackhole, "endless": endless, "big": big, "keys": keys, "crc": crc}

if __name__ == "__main__":
    for case in sys.argv[1:] or list(CASES):
        CASES[case]()
