"""Apache Kafka's binary wire protocol, sans-I/O (see docs/kafka-protocol.md).

:mod:`.primitives` holds the wire types, :mod:`.schema` the layout declarations and the generic
codec, ``apis_*`` the layouts, :mod:`.headers` the request and response headers and
:mod:`.codec` the frame-body entry points re-exported here.
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
    refused_produce_response,
    served_version_ranges,
    unsupported_version_response,
)
from odradek.protocol.kafka.headers import RequestHeader
from odradek.protocol.kafka.primitives import KafkaMalformed
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
    "encode_request",
    "encode_response",
    "encode_response_parts",
    "refused_produce_response",
    "served_version_ranges",
    "unsupported_version_response",
]
