"""tests/ports.py: the ports it reserves are ones the kernel never hands out."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from tests.ports import CLAIMS, LOWEST_PORT, _claim, _ephemeral_low, reserve_port

pytestmark = pytest.mark.skipif(
    _ephemeral_low() - LOWEST_PORT < 100, reason="the kernel's ephemeral range starts too low"
)


def test_reserved_ports_are_distinct_free_claimed_and_below_the_ephemeral_range() -> None:
    ports = [reserve_port() for _ in range(20)]
    assert all((CLAIMS / str(port)).read_text() == str(os.getpid()) for port in ports)
    assert len(set(ports)) == len(ports)
    assert all(LOWEST_PORT <= port < _ephemeral_low() for port in ports), ports
    for port in ports:
        with socket.create_server(("127.0.0.1", port)):
            pass


def test_a_held_port_is_skipped() -> None:
    port = reserve_port()
    with socket.create_server(("127.0.0.1", port + 1)):
        assert reserve_port() != port + 1


def test_a_live_processs_claim_is_skipped_and_a_dead_ones_taken_over() -> None:
    port = reserve_port()
    claim = CLAIMS / str(port)
    ended = subprocess.Popen(["true"])
    ended.wait()
    claim.write_text("1")  # init: runs as long as the machine
    assert not _claim(port)
    claim.write_text(str(ended.pid))
    assert _claim(port) and claim.read_text() == str(os.getpid())
    assert not _claim(port)  # this process's own claim is live too
