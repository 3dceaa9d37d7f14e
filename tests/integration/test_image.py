"""The container image (deploy/image/Containerfile), built and run as a user would, with buildah.

No image registry is reachable here, so the base is made from Debian's own packages
(scripts/build_base_image.sh, mmdebstrap) and passed as the BASE build argument; pip inside the build
reaches PyPI and reads this machine's pip cache through an overlay (the cache is never written). The
image's own entrypoint and command then run the event-log watcher inside a container (``buildah run``,
host network) over a folder of recorded event logs, and its /metrics is scraped from the host; the
browser's command serves its health endpoint. A step this machine cannot run (no buildah or mmdebstrap,
no Debian mirror or PyPI) is named in the skip, and fails instead with SPARK_STATE_OBSERVER_REQUIRE_REAL=1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from test_fleet import _batches, _write, parse, value

from conftest import REQUIRE_REAL, ROOT, free_port, need, wait_http
from spark_state_observer.history.loaders import load_batches, load_queries

pytestmark = pytest.mark.slow

TAG = "localhost/spark-state-observer:test"
BUILDAH = ["buildah", "--storage-driver", "vfs"]
UID = 10001  # the image's user, the one the Kubernetes manifests run as


def unavailable(step: str, detail: str) -> None:
    message = f"{step} cannot run on this machine: {detail}"
    if REQUIRE_REAL:
        pytest.fail(message)
    pytest.skip(message)


def buildah(*args: str, timeout: float = 120) -> str:
    result = subprocess.run([*BUILDAH, *args], capture_output=True, text=True, timeout=timeout, check=False)
    assert result.returncode == 0, f"buildah {' '.join(args)}: {result.stderr[-2000:]}"
    return result.stdout.strip()


def pip_cache() -> str | None:
    result = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True, check=False)
    path = result.stdout.strip()
    return path if result.returncode == 0 and os.path.isdir(path) else None


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Build the image on the Debian base; its configuration (``buildah inspect``). The image (1.3 GB) is
    removed afterwards: every run builds it anew, and the base stays cached."""
    need("buildah")
    need("mmdebstrap")
    log = tmp_path_factory.mktemp("image") / "build.log"
    env = {**os.environ, "BUILDAH": " ".join(BUILDAH)}
    base = subprocess.run(
        ["bash", os.path.join(ROOT, "scripts", "build_base_image.sh")], capture_output=True, text=True, env=env, check=False
    )
    if base.returncode != 0:
        unavailable("the Debian base image (scripts/build_base_image.sh)", base.stderr[-1500:])
    try:
        urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=20).close()
    except OSError as exc:
        unavailable("pip inside the build (PyPI)", str(exc))
    args = ["bud", "--isolation", "chroot", "--layers=false", "--build-arg", f"BASE={base.stdout.strip()}", "-t", TAG]
    cache = pip_cache()
    if cache:  # an overlay: the build reads the host's cache, its writes vanish with it
        args += ["--volume", f"{cache}:/root/.cache/pip:O"]
    with open(log, "w") as out:
        built = subprocess.run(
            [*BUILDAH, *args, "-f", os.path.join(ROOT, "deploy", "image", "Containerfile"), ROOT],
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=1200,
            check=False,
        )
    with open(log) as f:
        assert built.returncode == 0, f"the image did not build:\n{f.read()[-4000:]}"
    try:
        yield json.loads(buildah("inspect", "--type", "image", TAG))["OCIv1"]["config"]
    finally:
        buildah("rmi", TAG)


@pytest.fixture(scope="module")
def container(image: dict) -> Iterator[str]:
    """One working container of the image for the module (each is a full copy of the image on vfs)."""
    name = f"sso-test-{uuid.uuid4().hex[:8]}"
    buildah("from", "--name", name, TAG, timeout=300)
    yield name
    buildah("rm", name)


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                if entry.isdigit() and int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry))
        except (OSError, ValueError, IndexError):
            pass
    return out


class Running:
    """A command inside the container on the host network. SIGTERM goes to the command itself, the innermost
    process under ``buildah run`` (buildah would end it with SIGKILL); the group is killed if it hangs."""

    def __init__(self, container: str, argv: list[str], err_path: str, mounts: tuple[str, ...] = ()) -> None:
        self.err_path = err_path
        volumes = [a for m in mounts for a in ("--volume", m)]
        with open(err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [*BUILDAH, "run", "--isolation", "chroot", "--network", "host", *volumes, container, "--", *argv],
                stdout=err,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log(self) -> str:
        with open(self.err_path, errors="replace") as f:
            return f.read()[-3000:]

    def command_pid(self) -> int:
        pid = self.proc.pid
        while children := _children(pid):
            pid = children[0]
        return pid

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.kill(self.command_pid(), signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode


def test_the_image_runs_unprivileged_with_the_watcher_by_default(image: dict, container: str) -> None:
    assert image["User"] == f"{UID}:{UID}"
    assert image["Entrypoint"] == ["spark-state-observer"] and image["Cmd"][0] == "watch"
    assert {"9108/tcp", "8501/tcp"} <= image["ExposedPorts"].keys()
    who = buildah("run", "--isolation", "chroot", container, "--", "sh", "-c", "id -u; id -un; command -v pip || echo no-pip")
    assert who.split() == [str(UID), "spark-state-observer", "no-pip"], "non-root, a named user, no build tools left"
    extras = buildah(
        "run", "--isolation", "chroot", container, "--", "python3", "-c", "import psycopg, opentelemetry.sdk, streamlit; print('ok')"
    )
    assert extras == "ok"


def test_the_watcher_in_the_image_serves_recorded_logs(image: dict, container: str, tmp_path, postgres) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    _write(str(logs), "rocksdb_restart", "orders", "app-orders-1", finish=False)
    _write(str(logs), "hdfs", "payments", "app-payments-1", codec="lz4")
    for folder, _, files in os.walk(logs):  # the image's user reads what the host's root wrote
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    history = postgres.create_database(f"img_{uuid.uuid4().hex[:12]}")
    port = free_port()
    # the image's own entrypoint and command (watch /eventlogs), then what a test run adds
    argv = [*image["Entrypoint"], *image["Cmd"], "--host", "127.0.0.1", "--port", str(port), "--poll-interval", "0.3"]
    argv += ["--read-finished", "--labels", "cluster=image", "--history", history]
    watch = Running(container, argv, str(tmp_path / "watch.log"), (f"{logs}:/eventlogs:ro",))
    expected = {"orders": _batches("rocksdb_restart"), "payments": _batches("hdfs")}
    series: dict = {}
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            assert watch.proc.poll() is None, f"the watcher exited with {watch.proc.returncode}:\n{watch.log()}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    series = parse(r.read().decode())
            except OSError:
                series = {}
            # every batch, and the applications' statuses: the watcher's own series may come a rendering later than the batches
            statuses = [value(series, "spark_state_observer_watch_applications", status=s) for s in ("running", "finished")]
            if statuses == [1, 1] and all(
                value(series, "spark_streaming_batches_total", app=a, cluster="image") == n for a, n in expected.items()
            ):
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"the watcher in the image did not serve every batch and status; its log:\n{watch.log()}")
        assert value(series, "spark_streaming_application_info", app="orders", app_id="app-orders-1") == 1
        assert value(series, "spark_state_observer_watch_applications", status="running") == 1
        assert value(series, "spark_state_observer_watch_applications", status="finished") == 1
        # the recordings are days old and written now: each application may show that age as a clock skew, nothing else
        problems = {dict(labels)["kind"]: v for (n, labels), v in series.items() if n == "spark_state_observer_watch_problems_total" and v}
        assert set(problems) <= {"clock_skew"} and problems.get("clock_skew", 0) <= len(expected), problems
    finally:
        code = watch.stop()
    assert code == 0, f"SIGTERM should stop the watcher cleanly:\n{watch.log()}"
    queries = load_queries(history)  # the postgres extra at work: the watcher's history in the host's PostgreSQL
    assert sum(len(load_batches(history, q)) for q in queries.query_id) == sum(expected.values())


def test_the_browser_command_serves(image: dict, container: str, tmp_path) -> None:
    port = free_port()
    argv = [*image["Entrypoint"], "ui", "--host", "127.0.0.1", "--port", str(port), "--history", "sqlite:////tmp/history.db"]
    ui = Running(container, argv, str(tmp_path / "ui.log"))
    try:
        try:
            wait_http(f"http://127.0.0.1:{port}/_stcore/health", timeout=120)
        except Exception:
            pytest.fail(f"the browser in the image did not serve:\n{ui.log()}")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=10) as r:
            assert r.read().decode() == "ok"
    finally:
        ui.stop()
