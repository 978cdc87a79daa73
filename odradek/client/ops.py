"""The core requests' operations (Metadata, ListOffsets, Fetch, Produce, the handshake): sans-I/O
generators that yield :class:`Call`, run by either face's driver (:mod:`odradek.client.drivers`).

Top-level response errors are raised by :func:`check`; per-item errors are handled by the
operation (raised, or returned where the API says so).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from odradek.client.drivers import Call
from odradek.client.errors import KafkaError, for_code
from odradek.client.types import (
    BrokerMetadata,
    ClusterMetadata,
    FetchedPartition,
    OffsetAndTimestamp,
    TopicMetadata,
    TopicPartition,
)
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from odradek.protocol.frames import Buffer

__all__ = [
    "Call",
    "Op",
    "build_fetch",
    "build_produce",
    "check",
    "check_decodable",
    "fetch_op",
    "group_by_topic",
    "list_offsets_op",
    "metadata_op",
    "parse_fetch",
    "partition_errors",
    "request_topics",
    "response_partitions",
]

T = TypeVar("T")


Op = Generator[Call, tuple[m.Response, memoryview], T]


def check(response: m.Response) -> m.Response:
    """Raise the response's top-level error, if any; returns the response."""
    if response.error_code:
        raise for_code(response.error_code, response.error_message)
    return response


def check_decodable(request: m.Request, head: Buffer) -> None:
    """Raise ``TypeError`` (``ValueError`` for a number beyond its field's range) naming the
    field, if the broker could not decode ``request``, encoded as the frame's first part
    ``head`` (an argument of the wrong type passed through: a ``float`` timestamp, a ``str``
    count). Sent, such a request would make the broker close the connection, and
    :meth:`ClientCore.call <odradek.client.core.ClientCore.call>` would send it again until
    ``request_timeout_ms`` passed. The check is the broker's own decoder (a few µs). A Produce
    request is not checked: its records would have to be copied behind it, and the producer
    builds it from checked batches."""
    if request.declared_raw_bytes():
        return
    try:
        m.decode_request(memoryview(head)[4:])  # past the frame's length prefix
    except m.MalformedMessage as exc:
        found = re.search(r": (Expected .*?)(?: - at `\$(.*)`)?$", str(exc))
        why, path = (found.group(1), found.group(2) or "") if found else (str(exc), "")
        error = TypeError if ", got `" in why else ValueError
        raise error(f"{_field_name(request, path)}: {why}") from None


def _field_name(request: m.Request, path: str) -> str:
    """``ListOffsetsRequest.topics[0].partitions[0].timestamp`` for the decoder's ``$[3][0]
    [1][0][1]`` (structs are arrays of their fields, the request's tag first)."""
    name, node = type(request).__name__, request
    for depth, token in enumerate(re.findall(r"\[([^\]]*)\]", path)):
        if not token.isdigit():
            break  # a dict's key or value
        index = int(token) - (depth == 0)
        if isinstance(node, msgspec.Struct):
            field = node.__struct_fields__[index]
            name, node = f"{name}.{field}", getattr(node, field)
        elif isinstance(node, list):
            name, node = f"{name}[{index}]", node[index]
    return name


def group_by_topic(items: Iterable[tuple[TopicPartition, Any]]) -> dict[str, list[tuple[int, Any]]]:
    """``[(tp, x), ...]`` -> ``{topic: [(partition, x), ...]}`` in first-seen order."""
    out: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    for (topic, partition), value in items:
        out[topic].append((partition, value))
    return out


def request_topics(
    items: Mapping[TopicPartition, Any], topic: type, partition: Callable[[int, Any], Any]
) -> list[Any]:
    """A request's ``topics`` for ``{tp: x}``: ``topic(name=, partitions=[partition(p, x),
    ...])`` per topic, in first-seen order."""
    return [
        topic(name=name, partitions=[partition(p, x) for p, x in ps])
        for name, ps in group_by_topic(items.items()).items()
    ]


def partition_errors(
    resp: m.Response, context: str = ""
) -> Iterator[tuple[TopicPartition, Any, KafkaError | None]]:
    """``(tp, partition, error)`` for each partition of ``resp.topics`` (its top-level error
    raised first); ``error`` names ``context`` and the partition, ``None`` if it has none."""
    for topic in check(resp).topics:  # type: ignore[attr-defined]
        for part in topic.partitions:
            tp = TopicPartition(topic.name, part.partition_index)
            code = part.error_code
            yield tp, part, for_code(code, f"{context}{tp.topic}-{tp.partition}") if code else None


def response_partitions(
    resp: m.Response, context: str = ""
) -> Iterator[tuple[TopicPartition, Any]]:
    """``(tp, partition)`` for each partition of ``resp.topics``; raises the top-level error,
    then the first per-partition one (:func:`partition_errors`)."""
    for tp, part, error in partition_errors(resp, context):
        if error is not None:
            raise error
        yield tp, part


# ---- Metadata --------------------------------------------------------------------------------
def parse_metadata(resp: m.MetadataResponse) -> ClusterMetadata:
    return ClusterMetadata(
        cluster_id=resp.cluster_id,
        controller_id=resp.controller_id,
        brokers=[BrokerMetadata(b.node_id, b.host, b.port) for b in resp.brokers],
        topics={
            t.name: TopicMetadata(
                t.name,
                t.error_code,
                sorted(p.partition_index for p in t.partitions),
                t.is_internal,
            )
            for t in resp.topics
        },
    )


def metadata_op(
    topics: list[str] | None = None, allow_auto_create: bool = False
) -> Op[ClusterMetadata]:
    request = m.MetadataRequest(
        correlation_id=0,
        topics=None if topics is None else list(topics),
        allow_auto_topic_creation=allow_auto_create,
    )
    resp, _ = yield Call(request)
    return parse_metadata(check(resp))  # type: ignore[arg-type]


# ---- ListOffsets -----------------------------------------------------------------------------
def list_offsets_op(
    timestamps: Mapping[TopicPartition, int],
) -> Op[dict[TopicPartition, OffsetAndTimestamp | None]]:
    """The operation of :meth:`odradek.client.core.ClientCore.list_offsets` (its contract)."""
    topics = request_topics(
        timestamps,
        m.ListOffsetsTopic,
        lambda p, ts: m.ListOffsetsPartition(partition_index=p, timestamp=ts),
    )
    resp, _ = yield Call(m.ListOffsetsRequest(correlation_id=0, topics=topics))
    return {
        tp: None if part.offset < 0 else OffsetAndTimestamp(part.offset, part.timestamp)
        for tp, part in response_partitions(resp)
    }


# ---- Fetch -----------------------------------------------------------------------------------
def build_fetch(
    offsets: Mapping[TopicPartition, int],
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partition_max_bytes: int,
) -> m.FetchRequest:
    return m.FetchRequest(
        correlation_id=0,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        topics=request_topics(
            offsets,
            m.FetchTopic,
            lambda p, off: m.FetchPartition(
                partition_index=p, fetch_offset=off, partition_max_bytes=partition_max_bytes
            ),
        ),
    )


def parse_fetch(resp: m.FetchResponse, tail: memoryview) -> dict[TopicPartition, FetchedPartition]:
    check(resp)
    out = {}
    for topic, part, records in m.record_sections(resp, tail):
        error: KafkaError | None = None
        if part.error_code:
            error = for_code(part.error_code, f"{topic}-{part.partition_index}")
        out[TopicPartition(topic, part.partition_index)] = FetchedPartition(
            error, part.high_watermark, part.log_start_offset, records
        )
    return out


def fetch_op(
    offsets: Mapping[TopicPartition, int], **options: int
) -> Op[dict[TopicPartition, FetchedPartition]]:
    """One Fetch from ``offsets`` (``options``: :func:`build_fetch`'s) and its partitions."""
    resp, tail = yield Call(build_fetch(offsets, **options))
    return parse_fetch(resp, tail)  # type: ignore[arg-type]


# ---- Produce ---------------------------------------------------------------------------------
def build_produce(
    batches: Mapping[TopicPartition, Sequence[Buffer]], *, acks: int, timeout_ms: int
) -> tuple[m.ProduceRequest, list[Buffer]]:
    """One Produce request for one batch per partition, each given as the parts of its
    bytes; returns the request and its raw parts."""
    raw: list[Buffer] = []
    topics = []
    for topic, ps in group_by_topic(batches.items()).items():
        parts = []
        for partition, batch in ps:
            size = sum(map(len, batch))
            parts.append(m.ProducePartitionData(partition_index=partition, records_bytes=size))
            raw += batch
        topics.append(m.ProduceTopicData(name=topic, partitions=parts))
    return m.ProduceRequest(correlation_id=0, acks=acks, timeout_ms=timeout_ms, topics=topics), raw


# ---- Handshake -------------------------------------------------------------------------------
_NEEDED_APIS = (
    m.ApiKey.PRODUCE,
    m.ApiKey.FETCH,
    m.ApiKey.LIST_OFFSETS,
    m.ApiKey.METADATA,
)


def handshake_op(client_id: str) -> Op[BrokerMetadata | None]:
    """ApiVersions (the broker must speak version 0 of the core APIs), then Metadata for no
    topic: returns the broker's advertised address (``None`` if it lists no broker)."""
    resp, _ = yield Call(
        m.ApiVersionsRequest(
            correlation_id=0, client_software_name=client_id, client_software_version="0.1.0"
        )
    )
    check(resp)
    ranges = {r.api_key: (r.min_version, r.max_version) for r in resp.api_keys}  # type: ignore[attr-defined]
    for key in _NEEDED_APIS:
        lo, hi = ranges.get(int(key), (1, 0))
        if not lo <= 0 <= hi:
            raise for_code(ErrorCode.UNSUPPORTED_VERSION, f"broker does not speak {key.name} v0")
    meta = yield from metadata_op([])
    return meta.brokers[0] if meta.brokers else None
