"""Apache Kafka's binary wire protocol, sans-I/O (see docs/kafka-protocol.md).

:mod:`.primitives` holds the wire types, :mod:`.schema` the layout declarations and the generic
codec, ``apis_*`` the layouts, :mod:`.headers` the request and response headers and
:mod:`.codec` the frame-body entry points re-exported here; :mod:`.produce_response` writes
the data path's Produce answers straight from the shared handler's struct.
"""

from __future__ import annotations

from odradek.protocol.kafka.codec import (
    APIS,
    KafkaUnsupported,
    api_version_ranges,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_parts,
    served_version_ranges,
    unsupported_version_response,
)
from odradek.protocol.kafka.headers import RequestHeader
from odradek.protocol.kafka.primitives import KafkaMalformed
from odradek.protocol.kafka.produce_response import encode_produce_response
from odradek.protocol.kafka.schema import RecordsSlot

__all__ = [
    "APIS",
    "KafkaMalformed",
    "KafkaUnsupported",
    "RecordsSlot",
    "RequestHeader",
    "api_version_ranges",
    "decode_request",
    "decode_response",
    "encode_produce_response",
    "encode_request",
    "encode_response",
    "encode_response_parts",
    "served_version_ranges",
    "unsupported_version_response",
]
