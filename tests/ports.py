"""Loopback TCP ports for test servers, out of the kernel's reach.

A broker a test restarts binds the ports it had (its clients reconnect to the same address).
A port the kernel chose (a bind to port 0) lies in its ephemeral range
(``net.ipv4.ip_local_port_range``, 32768-60999 by default), and while the broker is down the
kernel may give it to anyone: another pytest-xdist worker's server, an outgoing connection.
The restart then fails with "Address already in use" (it did, in CI).

The kernel never chooses a port below its ephemeral range: those are bound only by a program
that names them. :func:`reserve_port` hands them out, each pytest-xdist worker from a slice of
its own (``PYTEST_XDIST_WORKER`` ``gwN`` of ``PYTEST_XDIST_WORKER_COUNT``), starting at an
offset drawn from the process id so that two test runs on one machine rarely meet, and skipping
any port something holds. A reserved port is one nothing listens on until its owner binds it.
"""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Iterator
from pathlib import Path

__all__ = ["reserve_port"]

LOWEST_PORT = 10_000  # below: well-known services a developer's machine may run


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def _candidates() -> Iterator[int]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker.removeprefix("gw")) if worker.removeprefix("gw").isdigit() else 0
    workers = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")), index + 1)
    size = (_ephemeral_low() - LOWEST_PORT) // workers
    if size < 100:  # a machine whose ephemeral range starts low: let the kernel choose
        return iter(())
    first = LOWEST_PORT + index * size
    start = (os.getpid() * 7_919) % size
    return (first + (start + i) % size for i in itertools.count())


_next = _candidates()


def _free(port: int) -> bool:
    """Whether nothing holds ``port`` on loopback (without SO_REUSEADDR, so a port still in
    TIME_WAIT counts as held too)."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def reserve_port() -> int:
    """A loopback port nothing listens on, that the kernel will not give away: this worker's
    next free one (0, "the kernel chooses", where the ephemeral range leaves no room)."""
    for port in itertools.islice(_next, 1_000):
        if _free(port):
            return port
    return 0
