"""The local servers' ports: free, on loopback, and outside the range outgoing connections draw from."""

from __future__ import annotations

import socket

from spark_state_observer.offline.local_process import PRIVATE_FLOOR, _ephemeral_low, free_port


def test_ports_are_free_and_below_the_ephemeral_range() -> None:
    """A port the kernel gives outgoing connections could be taken by any client before the server binds it."""
    low = _ephemeral_low()
    ports = [free_port() for _ in range(20)]
    for port in ports:
        if low > PRIVATE_FLOOR:
            assert PRIVATE_FLOOR <= port < low, (port, low)
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free: binds
