"""Forged record batches for the hostile-client tests: bytes no real client would send.

Each helper returns a whole v2 batch with a valid CRC (so only the deeper checks of
:mod:`odradek.protocol.validate` can refuse it).
"""

from __future__ import annotations

import functools
import struct

import cramjam

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.record_batch import HEADER_SIZE, LOG_OVERHEAD, recompute_crc
from odradek.protocol.varint import encode_varint

__all__ = ["INT32_MAX", "forge", "lying_count", "record", "records", "zstd_bomb"]

INT32_MAX = 2**31 - 1


def forge(body: bytes, count: int, *, codec: int = 0, timestamp_ms: int = 1_000) -> bytes:
    """A batch whose header says ``count`` records (lastOffsetDelta ``count - 1``), holding
    ``body`` as its records (compressed with ``codec`` as given), with a valid CRC."""
    template = bytearray(encode_batch([(b"k", b"v", timestamp_ms)])[:HEADER_SIZE])
    out = template + body
    struct.pack_into(">i", out, 8, len(out) - LOG_OVERHEAD)
    struct.pack_into(">h", out, 21, codec)
    struct.pack_into(">i", out, 23, count - 1)
    struct.pack_into(">i", out, 57, count)
    recompute_crc(out)
    return bytes(out)


def record(
    delta: int,
    *,
    key: bytes | None = b"k",
    value: bytes = b"v",
    headers: bytes = b"\x00",
    extra_length: int = 0,
) -> bytes:
    """One v2 record's bytes; ``extra_length`` makes its length prefix lie."""
    fields = [b"\x00", encode_varint(0), encode_varint(delta)]
    fields += [encode_varint(-1)] if key is None else [encode_varint(len(key)), key]
    fields += [encode_varint(len(value)), value, headers]
    inner = b"".join(fields)
    return encode_varint(len(inner) + extra_length) + inner


def records(n: int) -> bytes:
    return b"".join(record(i) for i in range(n))


def lying_count(claimed: int) -> bytes:
    """A one-record batch whose header claims ``claimed`` records (count and delta agree)."""
    return forge(records(1), claimed)


def zstd_bomb(frames: int, frame_bytes: int = 64 << 20) -> bytes:
    """A zstd-compressed batch of ``frames`` frames of ``frame_bytes`` zeros each (a 64 MiB
    frame is ~2 KB)."""
    return forge(_zeros_frame(frame_bytes) * frames, 1, codec=4)


@functools.cache
def _zeros_frame(frame_bytes: int) -> bytes:
    return bytes(cramjam.zstd.compress(b"\0" * frame_bytes, level=3))
