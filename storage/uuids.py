"""Kafka's ``Uuid`` in its text form, as stored in ``meta.properties`` and ``partition.metadata``.

Layout (``Uuid.toString``): the 16 bytes of the uuid in URL-safe base64 without padding, so
22 characters of ``[A-Za-z0-9_-]``. ``Uuid.fromString`` also takes the padded 24-character form
(``==`` appended); odradek reads both and writes only the unpadded one.

Invariants:
- ``new_uuid`` returns what ``Uuid.randomUuid()`` does: a version-4 uuid that is neither
  reserved (``Uuid.ZERO_UUID``, ``Uuid.ONE_UUID``) nor starts with ``-`` (which would read as a
  command-line option).
- ``uuid_bytes`` is strict: anything but 22 URL-safe base64 characters (optionally ``==``) is a
  ValueError; ``uuid_text(uuid_bytes(text))`` is the canonical unpadded form.

Crash safety: nothing here touches a file; the state files that hold uuids are written
atomically by their own modules.
"""

from __future__ import annotations

import base64
import re
import uuid

__all__ = ["new_uuid", "uuid_bytes", "uuid_text"]

_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}(?:==)?")
_RESERVED_UUIDS = (bytes(16), bytes(15) + b"\x01")  # Uuid.ZERO_UUID, Uuid.ONE_UUID


def uuid_bytes(text: str) -> bytes:
    """The 16 bytes of a Kafka Uuid string (``Uuid.fromString``); ValueError if it is not one."""
    if not _UUID_TEXT.fullmatch(text):
        raise ValueError(f"{text!r} is not a base64 uuid (22 URL-safe base64 characters)")
    return base64.urlsafe_b64decode(text[:22] + "==")


def uuid_text(raw: bytes) -> str:
    """The Kafka Uuid string of 16 bytes (``Uuid.toString``): unpadded URL-safe base64."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def new_uuid() -> str:
    """A random Kafka Uuid string, as ``Uuid.randomUuid().toString()``: a version-4 uuid in
    unpadded URL-safe base64, never a reserved uuid and never starting with ``-``."""
    while True:
        raw = uuid.uuid4().bytes
        text = uuid_text(raw)
        if raw not in _RESERVED_UUIDS and not text.startswith("-"):
            return text
