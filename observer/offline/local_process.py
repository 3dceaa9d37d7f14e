"""The local servers the offline tools start (Prometheus for a backtest, a Kafka broker for the demo and
the inspector's forecast): a free loopback port, and a stop by the child's own pid.

A server we started is stopped by its pid only, never by name, so another user's Prometheus or broker on
the same machine is never touched; one that ignores SIGTERM is killed so a tool never hangs on its way out.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the child binds it next; loopback only, never a public interface)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM ``proc`` by its pid if it still runs and wait up to ``timeout`` seconds; SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
