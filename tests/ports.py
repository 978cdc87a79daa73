"""Loopback TCP ports for test servers, out of the kernel's reach.

A broker a test restarts binds the ports it had (its clients reconnect to the same address).
A port the kernel chose (a bind to port 0) lies in its ephemeral range
(``net.ipv4.ip_local_port_range``, 32768-60999 by default), and while the broker is down the
kernel may give it to anyone: another pytest-xdist worker's server, an outgoing connection.
The restart then fails with "Address already in use" (it did, in CI).

The kernel never chooses a port below its ephemeral range: those are bound only by a program
that names them. :func:`reserve_port` hands them out, each pytest-xdist worker from a slice of
its own (``PYTEST_XDIST_WORKER`` ``gwN`` of ``PYTEST_XDIST_WORKER_COUNT``), starting at an
offset drawn from the process id, and skipping any port something holds. A reserved port is one
nothing listens on until its owner binds it.

Other test runs on the machine (another clone's ``make test``) use the same slices. A port is
therefore also claimed machine-wide, for the life of the process that reserved it: a file named
after it in ``$TMPDIR/odradek-test-ports``, created exclusively (``O_EXCL``), holds the
process id. A claim whose process is gone is taken over; a live one, this process's included,
is skipped, so a port is never handed out twice while its broker may still restart. A process
that exits normally removes its claims (``atexit``).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import socket
import tempfile
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


CLAIMS = Path(tempfile.gettempdir()) / "odradek-test-ports"
_mine: list[Path] = []  # this process's claims, removed at exit


@atexit.register
def _release() -> None:
    for path in _mine:  # (a forked child that exits leaves its parent's claims alone)
        with contextlib.suppress(OSError):
            if path.read_text() == str(os.getpid()):
                path.unlink()


def _claim(port: int) -> bool:
    """Claim ``port`` for this process (see the module docstring); whether it is ours now."""
    CLAIMS.mkdir(exist_ok=True)
    path = CLAIMS / str(port)
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if _claimed(path):
                return False
            path.unlink(missing_ok=True)  # its process is gone: take it over
            continue
        with os.fdopen(fd, "w") as claim:
            claim.write(str(os.getpid()))
        _mine.append(path)
        return True
    return False


def _claimed(path: Path) -> bool:
    """Whether the process whose id ``path`` holds still runs (a claim being written is)."""
    try:
        pid = int(path.read_text())
    except (OSError, ValueError):
        return path.exists()
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def reserve_port() -> int:
    """A loopback port nothing listens on, that the kernel will not give away and no other
    test process will take: this worker's next free one (0, "the kernel chooses", where the
    ephemeral range leaves no room)."""
    for port in itertools.islice(_next, 5_000):
        if _free(port) and _claim(port):
            return port
    return 0
