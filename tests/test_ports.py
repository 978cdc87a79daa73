"""tests/ports.py: the ports it reserves are ones the kernel never hands out."""

from __future__ import annotations

import socket

from tests.ports import LOWEST_PORT, _ephemeral_low, reserve_port


def test_reserved_ports_are_distinct_free_and_below_the_ephemeral_range() -> None:
    ports = [reserve_port() for _ in range(20)]
    assert len(set(ports)) == len(ports)
    assert all(LOWEST_PORT <= port < _ephemeral_low() for port in ports), ports
    for port in ports:
        with socket.create_server(("127.0.0.1", port)):
            pass


def test_a_held_port_is_skipped() -> None:
    port = reserve_port()
    with socket.create_server(("127.0.0.1", port + 1)):
        assert reserve_port() != port + 1
