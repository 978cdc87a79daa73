"""storage.uuids: Kafka's Uuid text form and random uuids."""

from __future__ import annotations

import base64
import uuid

import pytest

from odradek.storage.uuids import new_uuid, uuid_bytes


def test_uuid_bytes_matches_kafka() -> None:
    assert uuid_bytes("AAAAAAAAAAAAAAAAAAAAAA") == bytes(16)  # Uuid.ZERO_UUID
    assert uuid_bytes("AAAAAAAAAAAAAAAAAAAAAQ") == bytes(15) + b"\x01"  # Uuid.METADATA_TOPIC_ID
    assert uuid_bytes("AAAAAAAAAAAAAAAAAAAAAQ==") == bytes(15) + b"\x01"
    for bad in ("", "AAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAA/"):
        with pytest.raises(ValueError):
            uuid_bytes(bad)


def test_new_uuid_is_a_kafka_random_uuid() -> None:
    seen = set()
    for _ in range(500):
        text = new_uuid()
        assert len(text) == 22
        assert not text.startswith("-")
        raw = base64.urlsafe_b64decode(text + "==")
        assert base64.urlsafe_b64encode(raw).rstrip(b"=").decode() == text
        assert uuid.UUID(bytes=raw).version == 4  # java.util.UUID.randomUUID
        seen.add(text)
    assert len(seen) == 500


def test_new_uuid_skips_reserved_and_dash_leading(monkeypatch: pytest.MonkeyPatch) -> None:
    dash = uuid.UUID(bytes=b"\xf8" + bytes(15))
    good = uuid.UUID(bytes=b"\x10" + bytes(15))
    queue = [uuid.UUID(int=0), uuid.UUID(int=1), dash, good]
    monkeypatch.setattr(uuid, "uuid4", lambda: queue.pop(0))
    assert base64.urlsafe_b64encode(dash.bytes).startswith(b"-")
    assert new_uuid() == base64.urlsafe_b64encode(good.bytes).rstrip(b"=").decode()
    assert queue == []
