"""A real, throw-away PostgreSQL server for the tests and the benchmark.

``initdb`` into a temporary folder (as ``nobody`` when run as root: PostgreSQL refuses to run as root),
then the ``postgres`` binary itself on 127.0.0.1 and a free port, its unix socket inside the folder, so
the pid we hold is the server's and ``stop()`` shuts it down by that pid (SIGINT is PostgreSQL's fast
shutdown). Local connections trust; TCP trusts every role except ``PASSWORD_USER``, which must give its
SCRAM password, so a wrong password can be tested on the same server.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Any, Iterator

import pytest

REQUIRE_REAL = os.environ.get("SPARK_STATE_OBSERVER_REQUIRE_REAL") == "1"
PASSWORD_USER = "sso_secret"
PASSWORD = "s3cret-Pa55"
DATABASE = "history"


def find_bindir() -> str | None:
    """Debian keeps the server binaries off PATH in /usr/lib/postgresql/<major>/bin; take the newest."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[-3]) if p.split("/")[-3].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """One server in its own temporary folder; ``start``/``stop`` may be repeated (same port, same data)."""

    def __init__(self, bindir: str, fsync: bool = False) -> None:
        self.bindir = bindir
        self.root = tempfile.mkdtemp(prefix="sso-pg-")
        self.data = os.path.join(self.root, "data")
        self.port = _free_port()
        self.fsync = fsync
        self.proc: subprocess.Popen | None = None
        self._user: dict[str, Any] = {}
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.root, nobody.pw_uid, nobody.pw_gid)
            self._user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        self._run([os.path.join(bindir, "initdb"), "-D", self.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"])
        with open(os.path.join(self.data, "pg_hba.conf")) as f:
            hba = f.read()
        with open(os.path.join(self.data, "pg_hba.conf"), "w") as f:  # first matching line wins
            f.write(f"host all {PASSWORD_USER} 127.0.0.1/32 scram-sha-256\n" + hba)

    def _run(self, args: list[str]) -> None:
        proc = subprocess.run(args, capture_output=True, cwd=self.root, check=False, **self._user)
        if proc.returncode != 0:
            raise RuntimeError(f"{os.path.basename(args[0])} failed: {proc.stderr.decode(errors='replace')[-2000:]}")

    def url(self, user: str = "postgres", password: str | None = None, database: str = DATABASE) -> str:
        auth = user + (f":{password}" if password is not None else "")
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{database}"

    def start(self, timeout: float = 60.0) -> PostgresServer:
        args = [
            os.path.join(self.bindir, "postgres"),
            "-D",
            self.data,
            "-p",
            str(self.port),
            "-k",
            self.root,
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            f"fsync={'on' if self.fsync else 'off'}",
            "-c",
            "max_connections=60",
            "-c",
            "logging_collector=off",
        ]
        with open(os.path.join(self.root, "server.log"), "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=log, cwd=self.root, start_new_session=True, **self._user)
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.proc.returncode}: {self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"postgres did not become ready in {timeout:.0f} s: {self.log_tail()}")
            time.sleep(0.1)
        return self

    def _ready(self) -> bool:
        import psycopg

        try:
            psycopg.connect(self.url(database="postgres"), connect_timeout=2).close()
            return True
        except psycopg.OperationalError:
            return False

    def setup(self) -> PostgresServer:
        """The test database and the password-protected role (once, after the first start)."""
        import psycopg

        with psycopg.connect(self.url(database="postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
            conn.execute(f"CREATE ROLE {PASSWORD_USER} LOGIN PASSWORD '{PASSWORD}'")
            conn.execute(f"GRANT ALL ON DATABASE {DATABASE} TO {PASSWORD_USER}")
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"GRANT ALL ON SCHEMA public TO {PASSWORD_USER}")
        return self

    def create_database(self, name: str, owner: str = "postgres") -> str:
        """A fresh, empty database on this server (owned by ``owner``); returns its URL for ``owner``."""
        import psycopg

        with psycopg.connect(self.url(database="postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} OWNER {owner}")
        return self.url(owner, PASSWORD if owner == PASSWORD_USER else None, database=name)

    def log_tail(self) -> str:
        try:
            with open(os.path.join(self.root, "server.log"), errors="replace") as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Fast shutdown by the server's pid (SIGINT), SIGKILL if it does not go."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def new_server(fsync: bool = False) -> PostgresServer:
    """A started server with the test database; skip the test without PostgreSQL (fail where it is required)."""
    bindir = find_bindir()
    if bindir is None:
        message = "PostgreSQL server binaries not found (apt-get install postgresql)"
        if REQUIRE_REAL:
            pytest.fail(message)
        pytest.skip(message)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        message = "psycopg is not installed (pip install -e '.[postgres]')"
        if REQUIRE_REAL:
            pytest.fail(message)
        pytest.skip(message)
    server = PostgresServer(bindir, fsync=fsync)
    try:
        return server.start().setup()
    except Exception:
        server.remove()
        raise


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole test session."""
    server = new_server()
    try:
        yield server
    finally:
        server.remove()
