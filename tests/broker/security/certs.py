"""Certificates for the security tests, made by trustme: one CA the broker trusts, another it
does not, a server certificate for 127.0.0.1, client certificates (one expired).

Files (PEM) in a directory: ``server.pem`` (key + chain: Kafka's PEM keystore), ``ca.pem``,
``other-ca.pem``, ``alice.pem``/``alice.key``, ``expired.pem``/``expired.key``,
``stranger.pem``/``stranger.key`` (signed by the other CA).
"""

from __future__ import annotations

import datetime
from pathlib import Path

import trustme

__all__ = ["make_certs"]


def make_certs(directory: Path) -> Path:
    ca, other = trustme.CA(organization_name="odradek tests"), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    server.private_key_and_cert_chain_pem.write_to_path(str(directory / "server.pem"))
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    other.cert_pem.write_to_path(str(directory / "other-ca.pem"))
    past = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    clients = {
        "alice": ca.issue_cert(common_name="alice", organization_unit_name="eng"),
        "expired": ca.issue_cert(
            common_name="expired", not_before=past, not_after=past + datetime.timedelta(days=1)
        ),
        "stranger": other.issue_cert(common_name="stranger"),
    }
    for name, cert in clients.items():
        cert.cert_chain_pems[0].write_to_path(str(directory / f"{name}.pem"))
        cert.private_key_pem.write_to_path(str(directory / f"{name}.key"))
    return directory
