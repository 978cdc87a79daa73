"""``scram-credentials.json``: the SCRAM credentials of every user (odradek's own file).

Kafka keeps SCRAM credentials in its metadata log (``kafka-configs --alter --add-config
'SCRAM-SHA-256=[...]'``); odradek has no controller, so they live in this file, one copy in
each online root of ``log.dirs``, exactly as ``topic-configs.json`` does::

    {"version": 3,
     "users": {"alice": {"SCRAM-SHA-256": {"salt": "<base64>", "stored_key": "<base64>",
                                           "server_key": "<base64>", "iterations": 4096}}}}

No password is stored, and none can be recovered from the file: ``stored_key`` is
``H(HMAC(SaltedPassword, "Client Key"))`` (:mod:`odradek.protocol.sasl`). Still, the file
is written mode 0600 (from its first byte): its keys let a reader try to guess weak
passwords offline.

Versions, copies and crash safety: :mod:`odradek.storage.replicated`.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from odradek.protocol.sasl import SCRAM_MECHANISMS, ScramCredential
from odradek.storage.replicated import read_table, write_table

__all__ = ["CREDENTIALS", "CredentialStore"]

CREDENTIALS = "scram-credentials.json"
Users = dict[str, dict[str, ScramCredential]]  # user -> mechanism -> credential


def _decode(data: Mapping) -> Users:
    users: Users = {}
    for user, mechanisms in data.items():
        users[str(user)] = {}
        for mechanism, c in mechanisms.items():
            if mechanism not in SCRAM_MECHANISMS:
                raise ValueError(f"unknown mechanism {mechanism!r}")
            users[str(user)][mechanism] = ScramCredential(
                mechanism,
                base64.b64decode(c["salt"]),
                base64.b64decode(c["stored_key"]),
                base64.b64decode(c["server_key"]),
                int(c["iterations"]),
            )
    return users


def _encode(users: Users) -> dict[str, Any]:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return {
        user: {
            m: {
                "salt": b64(c.salt),
                "stored_key": b64(c.stored_key),
                "server_key": b64(c.server_key),
                "iterations": c.iterations,
            }
            for m, c in mechanisms.items()
        }
        for user, mechanisms in users.items()
        if mechanisms
    }


class CredentialStore:
    """The users' credentials, loaded from and saved to every root (single writer)."""

    def __init__(self, roots: Iterable[Path]) -> None:
        version, users = read_table(roots, CREDENTIALS, "users", _decode)
        self.version, self.users = version, users or {}

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.users.get(user, {}).get(mechanism)

    def any_credential(self, user: str) -> ScramCredential | None:
        """One of the user's credentials (PLAIN checks a password against it)."""
        mechanisms = self.users.get(user, {})
        return next(iter(mechanisms.values()), None)

    def apply(
        self,
        roots: Iterable[Path],
        upserts: Iterable[tuple[str, ScramCredential]] = (),
        deletes: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Set ``(user, credential)`` pairs and delete ``(user, mechanism)`` pairs, then
        write the table to every root in ``roots``; on failure nothing changes in memory."""
        users = {u: dict(ms) for u, ms in self.users.items()}
        for user, credential in upserts:
            users.setdefault(user, {})[credential.mechanism] = credential
        for user, mechanism in deletes:
            users.get(user, {}).pop(mechanism, None)
        users = {u: ms for u, ms in users.items() if ms}
        write_table(roots, CREDENTIALS, "users", self.version + 1, _encode(users), mode=0o600)
        self.version, self.users = self.version + 1, users
