"""Kafka's security APIs on one connection: SaslHandshake and SaslAuthenticate (the exchange
itself is :class:`odradek.broker.security.sasl.SaslExchange`), and the SCRAM credential
admin APIs that ``kafka-configs --alter --add-config 'SCRAM-SHA-256=[...]'`` and the admin
clients use (DescribeUserScramCredentials, AlterUserScramCredentials).

AlterUserScramCredentials, as Kafka answers it, one result per user: a user named twice in
one request with the same mechanism twice is ``DUPLICATE_RESOURCE`` (both mechanisms at once
is fine: ``kafka-configs`` sends them so); an unknown mechanism ``UNSUPPORTED_SASL_MECHANISM``;
an empty name or an iteration count outside [4096, 16384] ``UNACCEPTABLE_CREDENTIAL``;
deleting a credential that does not exist ``RESOURCE_NOT_FOUND``. The valid changes are
applied together and persisted (``scram-credentials.json``) before the answer.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from odradek.broker.security import sasl
from odradek.broker.security.authorizer import allowed
from odradek.protocol.acl import Operation, ResourceType
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka import RequestHeader
from odradek.protocol.sasl import (
    MAX_ITERATIONS,
    MECHANISM_IDS,
    MIN_ITERATIONS,
    credential_from_salted,
)

if TYPE_CHECKING:
    from odradek.broker.connection import Connection

__all__ = ["SecurityApis"]

_MECHANISM_NUMBERS = {name: number for number, name in MECHANISM_IDS.items()}


class SecurityApis:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.ctx = conn.ctx

    def _enabled(self) -> list[str]:
        return list(self.ctx.config["sasl.enabled.mechanisms"])  # type: ignore[call-overload]

    async def sasl_handshake(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        code = sasl.handshake(self.conn, req["mechanism"])
        return {"error_code": code, "mechanisms": self._enabled()}

    async def sasl_authenticate(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        code, message, answer = await sasl.authenticate(self.conn, bytes(req["auth_bytes"]))
        return {
            "error_code": code,
            "error_message": message,
            "auth_bytes": answer,
            "session_lifetime_ms": 0,
        }

    async def describe_user_scram_credentials(
        self, header: RequestHeader, req: dict[str, Any]
    ) -> dict:
        store = self.ctx.security.credentials
        if not allowed(Operation.DESCRIBE, ResourceType.CLUSTER):
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return {"throttle_time_ms": 0, "error_code": code, "error_message": None, "results": []}
        names = req["users"]
        wanted = sorted(store.users) if names is None else [u["name"] for u in names]
        counts = Counter(wanted)
        results = []
        for name in dict.fromkeys(wanted):
            mechanisms = store.users.get(name, {})
            code, message = ErrorCode.NONE, None
            if counts[name] > 1:
                code, message = ErrorCode.DUPLICATE_RESOURCE, "user named more than once"
            elif not mechanisms:
                code, message = ErrorCode.RESOURCE_NOT_FOUND, f"no credential for user {name}"
            infos = [
                {"mechanism": _MECHANISM_NUMBERS[m], "iterations": c.iterations}
                for m, c in sorted(mechanisms.items())
            ]
            results.append(
                {
                    "user": name,
                    "error_code": code,
                    "error_message": message,
                    "credential_infos": infos if not code else [],
                }
            )
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}

    async def alter_user_scram_credentials(
        self, header: RequestHeader, req: dict[str, Any]
    ) -> dict:
        store = self.ctx.security.credentials
        if not allowed(Operation.ALTER, ResourceType.CLUSTER):
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            names = dict.fromkeys(d["name"] for d in [*req["deletions"], *req["upsertions"]])
            return {
                "throttle_time_ms": 0,
                "results": [{"user": n, "error_code": code, "error_message": None} for n in names],
            }
        counts = Counter(
            (d["name"], d["mechanism"]) for d in [*req["deletions"], *req["upsertions"]]
        )
        errors: dict[str, tuple[ErrorCode, str]] = {}
        deletes, upserts = [], []
        for item in req["deletions"]:
            name, mechanism = item["name"], MECHANISM_IDS.get(item["mechanism"])
            error = _refusal(name, mechanism, counts[name, item["mechanism"]])
            if error is None and store.lookup(name, mechanism) is None:  # type: ignore[arg-type]
                error = (ErrorCode.RESOURCE_NOT_FOUND, f"no {mechanism} credential for {name}")
            if error is not None:
                errors[name] = error
            else:
                deletes.append((name, mechanism))
        for item in req["upsertions"]:
            name, mechanism = item["name"], MECHANISM_IDS.get(item["mechanism"])
            error = _refusal(name, mechanism, counts[name, item["mechanism"]])
            if error is None and not MIN_ITERATIONS <= item["iterations"] <= MAX_ITERATIONS:
                error = (
                    ErrorCode.UNACCEPTABLE_CREDENTIAL,
                    f"iterations must be in [{MIN_ITERATIONS}, {MAX_ITERATIONS}]",
                )
            if error is None and not item["salt"]:
                error = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "empty salt")
            if error is not None:
                errors[name] = error
                continue
            credential = credential_from_salted(
                mechanism,  # type: ignore[arg-type]
                bytes(item["salt"]),
                bytes(item["salted_password"]),
                item["iterations"],
            )
            upserts.append((name, credential))
        if deletes or upserts:
            async with self.ctx.admin_lock:
                await anyio.to_thread.run_sync(
                    store.apply, self.ctx.manager.online_dirs, upserts, deletes
                )
            self.ctx.log.info(
                "SCRAM credentials changed",
                upserted=sorted({f"{n}/{c.mechanism}" for n, c in upserts}),
                deleted=sorted({f"{n}/{m}" for n, m in deletes}),
                by=self.conn.principal,
            )
        results = []
        for name in dict.fromkeys(d["name"] for d in [*req["deletions"], *req["upsertions"]]):
            code, message = errors.get(name, (ErrorCode.NONE, None))
            results.append({"user": name, "error_code": code, "error_message": message})
        return {"throttle_time_ms": 0, "results": results}


def _refusal(name: str, mechanism: str | None, times: int) -> tuple[ErrorCode, str] | None:
    if times > 1:
        return ErrorCode.DUPLICATE_RESOURCE, f"{name}'s {mechanism} credential altered twice"
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "unknown SCRAM mechanism"
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "empty user name"
    return None
