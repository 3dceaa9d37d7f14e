"""The local servers the offline tools start (Prometheus for a backtest, a Kafka broker for the demo and
the inspector's forecast): a free loopback port, and a stop by the child's own pid.

A server we started is stopped by its pid only, never by name, so another user's Prometheus or broker on
the same machine is never touched; one that ignores SIGTERM is killed so a tool never hangs on its way out.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess

PRIVATE_FLOOR = 20000  # the lowest port free_port picks itself (well-known and registered services sit lower)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the child binds it next; loopback only, never a public interface).

    Taken below the kernel's ephemeral range when it can be: a port the kernel hands out for ``bind(0)`` comes
    from the range it also gives every outgoing connection, so another process's client could take it before
    the child binds it (seen with two test processes side by side). Below that range only a listener asks.
    """
    low = _ephemeral_low()
    if low > PRIVATE_FLOOR:
        for _ in range(50):
            port = random.randrange(PRIVATE_FLOOR, low)
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ephemeral_low() -> int:
    """The lowest port of the kernel's ephemeral range (Linux), else 0 (then the kernel picks)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


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
