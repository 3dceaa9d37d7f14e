"""A real S3-compatible server for the object-store tests: s3proxy (fetched by scripts/fetch_s3proxy.sh).

Its in-memory backend (``transient``: keys kept as S3 keeps them, so the folder markers s3a writes and
reads behave as on S3; the filesystem backends turn them into folders or files and Spark's checkpoint
fails), on 127.0.0.1 and a free port, stopped by its own pid. The
clients find it the way a user's would: through the AWS environment variables (``AWS_ENDPOINT_URL`` and
keys), with the checksum settings s3proxy 2.6 needs (it rejects the checksum headers recent AWS SDKs send).
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from typing import Iterator

import pytest

REQUIRE_REAL = os.environ.get("SPARK_STATE_OBSERVER_REQUIRE_REAL") == "1"
JAR_DIR = os.environ.get("SPARK_STATE_OBSERVER_S3PROXY_DIR", os.path.expanduser("~/.cache/spark-state-observer/s3proxy"))
IDENTITY = "sso-test-identity"
CREDENTIAL = "sso-test-credential"


def _missing(message: str) -> None:
    if REQUIRE_REAL:
        pytest.fail(message)
    pytest.skip(message)


class S3Server:
    """s3proxy on loopback; ``env`` is what a client needs to reach it."""

    def __init__(self, jar: str, root: str) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{port}"
        conf = os.path.join(root, "s3proxy.conf")
        with open(conf, "w") as f:
            f.write(
                f"s3proxy.endpoint={self.endpoint}\n"
                "s3proxy.authorization=aws-v2-or-v4\n"
                f"s3proxy.identity={IDENTITY}\ns3proxy.credential={CREDENTIAL}\n"
                "jclouds.provider=transient\njclouds.identity=local\njclouds.credential=local\n"
            )
        self.log = open(os.path.join(root, "s3proxy.log"), "wb")
        self.proc = subprocess.Popen(
            ["java", "-Xmx512m", "-jar", jar, "--properties", conf], stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.env = {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": IDENTITY,
            "AWS_SECRET_ACCESS_KEY": CREDENTIAL,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
            "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
        }
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.endpoint, timeout=2)
                break
            except urllib.error.HTTPError:  # an S3 error document: the server answers
                break
            except Exception:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"s3proxy did not start (see {self.log.name})") from None
                time.sleep(0.3)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One s3proxy for the session; its environment is set for this process (and the CLIs it starts)."""
    jars = sorted(glob.glob(os.path.join(JAR_DIR, "s3proxy-*.jar")))
    if not jars:
        _missing(f"s3proxy is not in {JAR_DIR} (bash scripts/fetch_s3proxy.sh)")
    if shutil.which("java") is None:
        _missing("java is not installed (apt-get install default-jre-headless)")
    try:
        import s3fs  # noqa: F401
    except ImportError:
        _missing("s3fs is not installed (pip install 'spark-state-observer[s3]')")
    root = tempfile.mkdtemp(prefix="sso-s3proxy-")
    server = S3Server(jars[-1], root)
    saved = {k: os.environ.get(k) for k in server.env}
    os.environ.update(server.env)
    try:
        yield server
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
