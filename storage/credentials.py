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

``version`` counts the writes; every change rewrites the whole table to every online root
and at start-up the copy with the highest version wins, so losing a root or a crash between
two roots' writes loses no credential. A copy that does not parse is logged and ignored.
Crash safety: each copy is replaced atomically (:func:`odradek.storage.atomic.write_atomically`),
so a reader sees a whole old or a whole new table.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

from odradek.protocol.sasl import SCRAM_MECHANISMS, ScramCredential
from odradek.storage.atomic import write_atomically

__all__ = ["CREDENTIALS", "CredentialStore"]

logger = logging.getLogger(__name__)

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


def _encode(version: int, users: Users) -> bytes:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    table = {
        user: {
            m: {
                "salt": b64(c.salt),
                "stored_key": b64(c.stored_key),
                "server_key": b64(c.server_key),
                "iterations": c.iterations,
            }
            for m, c in sorted(mechanisms.items())
        }
        for user, mechanisms in sorted(users.items())
        if mechanisms
    }
    return json.dumps({"version": version, "users": table}, indent=1, sort_keys=True).encode()


class CredentialStore:
    """The users' credentials, loaded from and saved to every root (single writer)."""

    def __init__(self, roots: Iterable[Path]) -> None:
        self.version, self.users = 0, {}
        for root in roots:
            path = root / CREDENTIALS
            try:
                data = json.loads(path.read_bytes())
                version, users = int(data["version"]), _decode(data["users"])
            except FileNotFoundError:
                continue
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                logger.error("ignoring unreadable %s: %s", path, exc)
                continue
            if version > self.version:
                self.version, self.users = version, users

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
        data = _encode(self.version + 1, users)
        for root in roots:
            write_atomically(root / CREDENTIALS, data, mode=0o600)
        self.version, self.users = self.version + 1, users
