"""ProduceResponse bodies written straight from the shared handler's answer: the data path's
reply, with no dict in between.

Every other response goes through the generic codec (fields as a dict, :mod:`.compiler`); a
Produce answer is built once per request on the hottest path, so it is written here directly
from :class:`odradek.protocol.messages.ProduceResponse` (the native protocol's struct, which the
one produce implementation returns). The layout, per Kafka's ``ProduceResponse.json`` as
declared in :data:`.apis_data.PRODUCE` — the generic encoder of that declaration is this
module's oracle, byte for byte, in ``tests/protocol/kafka/test_produce_response.py``::

    correlation_id        int32                      response header v0; v9: header v1, + 0x00
    responses             array                      int32 count; v9: uvarint count + 1
      name                  string                   int16 length; v9: uvarint length + 1
      partition_responses   array
        index                 int32
        error_code            int16
        base_offset           int64
        log_append_time_ms    int64                  v2+
        log_start_offset      int64                  v5+
        record_errors         array, always empty    v8+  (int32 0; v9: 0x01)
        error_message         nullable string        v8+  (-1 / 0x00 for null)
        (tagged fields)       0x00                   v9
      (tagged fields)       0x00                     v9
    throttle_time_ms      int32, always 0            v1+
    (tagged fields)       0x00                       v9

Versions 0-9 (the codec's range for Produce); v10+ adds tagged leader hints, not spoken here.
"""

from __future__ import annotations

import struct

from odradek.protocol.kafka.primitives import encode_compact_string, encode_string, encode_uvarint
from odradek.protocol.messages import ProduceResponse

__all__ = ["encode_produce_response"]

_INT32 = struct.Struct(">i")
_PARTITION_V0 = struct.Struct(">ihq")  # index, error_code, base_offset
_PARTITION_V2 = struct.Struct(">ihqq")  # + log_append_time_ms
_PARTITION_V5 = struct.Struct(">ihqqq")  # + log_start_offset
_FIRST_FLEXIBLE = 9
_VERSIONS = range(0, 10)


def encode_produce_response(version: int, correlation_id: int, response: ProduceResponse) -> bytes:
    """The response frame body (header included) answering a Produce request of ``version``.

    ``record_errors`` is always empty: the shared handler rejects a batch whole. Raises
    ``ValueError`` for a version outside 0-9 and ``KafkaMalformed`` for an error message over
    32,767 bytes in a non-flexible version (the codec's string rule)."""
    if version not in _VERSIONS:
        raise ValueError(f"ProduceResponse v{version} is not spoken here")
    flexible = version >= _FIRST_FLEXIBLE
    out = bytearray(_INT32.pack(correlation_id))
    if flexible:
        out += b"\x00"
        string, empty_array, count = encode_compact_string, b"\x01", _compact_count
    else:
        string, empty_array, count = encode_string, b"\x00\x00\x00\x00", _count
    count(out, len(response.topics))
    for topic in response.topics:
        string(out, topic.name)
        count(out, len(topic.partitions))
        for p in topic.partitions:
            if version >= 5:
                out += _PARTITION_V5.pack(
                    p.partition_index,
                    p.error_code,
                    p.base_offset,
                    p.log_append_time_ms,
                    p.log_start_offset,
                )
            elif version >= 2:
                out += _PARTITION_V2.pack(
                    p.partition_index, p.error_code, p.base_offset, p.log_append_time_ms
                )
            else:
                out += _PARTITION_V0.pack(p.partition_index, p.error_code, p.base_offset)
            if version >= 8:
                out += empty_array
                string(out, p.error_message)
            if flexible:
                out += b"\x00"
        if flexible:
            out += b"\x00"
    if version >= 1:
        out += b"\x00\x00\x00\x00"
    if flexible:
        out += b"\x00"
    return bytes(out)


def _count(out: bytearray, n: int) -> None:
    out += _INT32.pack(n)


def _compact_count(out: bytearray, n: int) -> None:
    encode_uvarint(out, n + 1)
