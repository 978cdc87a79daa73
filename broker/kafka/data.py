"""Kafka's record APIs onto the shared handlers (:class:`odradek.broker.data.DataApi`):
Produce, Fetch, ListOffsets, DeleteRecords, InitProducerId.

Each adapter takes the request header and the decoded fields (:mod:`odradek.protocol.kafka`)
and returns the response fields; nothing here reads or writes a log itself. What Kafka's
protocol has and the native one does not is settled here:

- **Leader epochs.** One node, one leader epoch: 0 (stamped on every appended batch and kept in
  ``leader-epoch-checkpoint``). A request naming ``current_leader_epoch`` -1 skips the check;
  0 passes; a larger one answers ``UNKNOWN_LEADER_EPOCH`` and a smaller one
  ``FENCED_LEADER_EPOCH``, as Kafka's leader does.
- **Fetch sessions** (KIP-227) are refused the way Kafka allows: ``session_id`` 0 in every
  answer, so clients send full fetches. A request naming a session this broker never gave
  answers ``FETCH_SESSION_ID_NOT_FOUND``.
- **Transactions** are not supported: ``transactional_id`` on Produce or InitProducerId
  answers ``INVALID_REQUEST`` (the reason is logged; docs/protocol.md).
- Produce v0-2 are advertised for old librdkafka and refused per partition with
  ``UNSUPPORTED_VERSION``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from odradek.broker.data import DataApi
from odradek.broker.fetch import Reply
from odradek.broker.produce import Section
from odradek.broker.security.authorizer import may_write_idempotently
from odradek.protocol import kafka
from odradek.protocol import messages as m
from odradek.protocol.errors import ErrorCode
from odradek.protocol.kafka import RecordsSlot, RequestHeader
from odradek.storage.errors import StorageError

__all__ = ["NO_TRANSACTIONS", "KafkaReply", "RecordApis", "epoch_error"]

LEADER_EPOCH = 0  # the only leader epoch of a single node
NO_LEADER_EPOCH = -1  # a request that names none: nothing to check
_EMPTY = memoryview(b"")
NO_TRANSACTIONS = "transactions are not supported by odradek"


class KafkaReply:
    """Response fields whose ``records`` slots are file regions, held until :meth:`release`."""

    __slots__ = ("fields", "reply")

    def __init__(self, fields: dict[str, Any], reply: Reply) -> None:
        self.fields = fields
        self.reply = reply

    def release(self) -> None:
        self.reply.release()


def epoch_error(current_leader_epoch: int) -> ErrorCode:
    """Kafka's leader-epoch check of a request against this node's epoch (module docstring)."""
    if current_leader_epoch in (NO_LEADER_EPOCH, LEADER_EPOCH):
        return ErrorCode.NONE
    if current_leader_epoch > LEADER_EPOCH:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.FENCED_LEADER_EPOCH


class RecordApis:
    def __init__(self, data: DataApi, log: Any, allocate_producer_id: Callable[[], int]) -> None:
        self.data = data
        self.log = log
        self.allocate_producer_id = allocate_producer_id

    # -- Produce ---------------------------------------------------------------------------

    async def produce(
        self, header: RequestHeader, req: dict[str, Any]
    ) -> Awaitable[m.ProduceResponse]:
        """Append now (the session calls this in arrival order); the awaitable gives the
        answer (encoded by :func:`odradek.protocol.kafka.encode_produce_response`) once the
        appends are durable as ``acks`` asks."""
        if not kafka.APIS[header.api_key].is_served(header.api_version):  # v0-2
            return _ready(_refused(req, ErrorCode.UNSUPPORTED_VERSION))
        if req["transactional_id"] is not None:
            self.log.info("transactional produce refused", transactional_id=req["transactional_id"])
            return _ready(_refused(req, ErrorCode.INVALID_REQUEST, NO_TRANSACTIONS))
        sections: list[Section] = []
        for topic in req["topic_data"]:
            name = topic["name"]
            for part in topic["partition_data"]:
                records = part["records"]
                records = _EMPTY if records is None else records
                sections.append(
                    (
                        name,
                        m.ProducePartitionData(
                            partition_index=part["index"], records_bytes=len(records)
                        ),
                        records,
                    )
                )
        native = m.ProduceRequest(
            correlation_id=header.correlation_id, acks=req["acks"], timeout_ms=req["timeout_ms"]
        )
        return await self.data.produce_api.produce_sections(native, sections)

    # -- Fetch -----------------------------------------------------------------------------

    async def fetch(self, header: RequestHeader, req: dict[str, Any]) -> KafkaReply | dict:
        session_id, session_epoch = req.get("session_id", 0), req.get("session_epoch", -1)
        if session_id != 0:
            return _fetch_error(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id)
        if session_epoch not in (0, -1):
            return _fetch_error(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
        checked, refused = _check_epochs(
            req["topics"],
            "topic",
            "partition",
            lambda p: m.FetchPartition(
                partition_index=p["partition"],
                fetch_offset=p["fetch_offset"],
                partition_max_bytes=max(p["partition_max_bytes"], 0),
            ),
        )
        topics = [m.FetchTopic(name=name, partitions=parts) for name, parts in checked if parts]
        native = m.FetchRequest(
            correlation_id=header.correlation_id,
            max_wait_ms=max(req["max_wait_ms"], 0),
            min_bytes=max(req["min_bytes"], 0),
            max_bytes=max(req["max_bytes"], 0),
            topics=topics,
        )
        reply = await self.data.fetch_api.fetch(native)
        regions = iter(reply.regions)
        responses = []
        for topic in reply.response.topics:
            partitions = []
            for p in topic.partitions:
                records: Any = b""  # never null: librdkafka reads null as a bad size
                if p.records_bytes:
                    region = next(regions)
                    records = RecordsSlot(region.length, region)
                partitions.append(
                    {
                        "partition_index": p.partition_index,
                        "error_code": p.error_code,
                        "high_watermark": p.high_watermark,
                        "last_stable_offset": p.high_watermark,  # no transactions: LSO = HW
                        "log_start_offset": p.log_start_offset,
                        "aborted_transactions": [],
                        "preferred_read_replica": -1,
                        "records": records,
                    }
                )
            responses.append({"topic": topic.name, "partitions": partitions})
        for name, partition, code in refused:
            responses.append(
                {"topic": name, "partitions": [_fetch_partition_error(partition, code)]}
            )
        fields = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}
        return KafkaReply(fields, reply)

    # -- ListOffsets / DeleteRecords -------------------------------------------------------

    async def list_offsets(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        checked, refused = _check_epochs(
            req["topics"],
            "name",
            "partition_index",
            lambda p: m.ListOffsetsPartition(
                partition_index=p["partition_index"], timestamp=p["timestamp"]
            ),
        )
        topics = [m.ListOffsetsTopic(name=name, partitions=ps) for name, ps in checked if ps]
        native = await self.data.list_offsets(
            m.ListOffsetsRequest(correlation_id=header.correlation_id, topics=topics)
        )
        out = []
        for topic in native.topics:
            partitions = [
                {
                    "partition_index": p.partition_index,
                    "error_code": p.error_code,
                    "timestamp": p.timestamp,
                    "offset": p.offset,
                    "leader_epoch": LEADER_EPOCH if p.error_code == 0 and p.offset >= 0 else -1,
                }
                for p in topic.partitions
            ]
            out.append({"name": topic.name, "partitions": partitions})
        for name, partition, code in refused:
            error = {"partition_index": partition, "error_code": code, "timestamp": -1}
            out.append({"name": name, "partitions": [error | {"offset": -1, "leader_epoch": -1}]})
        return {"throttle_time_ms": 0, "topics": out}

    async def delete_records(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        topics = [
            m.DeleteRecordsTopic(
                name=t["name"],
                partitions=[
                    m.DeleteRecordsPartition(
                        partition_index=p["partition_index"], offset=p["offset"]
                    )
                    for p in t["partitions"]
                ],
            )
            for t in req["topics"]
        ]
        native = await self.data.delete_records(
            m.DeleteRecordsRequest(
                correlation_id=header.correlation_id, topics=topics, timeout_ms=req["timeout_ms"]
            )
        )
        return {
            "throttle_time_ms": 0,
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {
                            "partition_index": p.partition_index,
                            "low_watermark": p.low_watermark,
                            "error_code": p.error_code,
                        }
                        for p in t.partitions
                    ],
                }
                for t in native.topics
            ],
        }

    # -- InitProducerId --------------------------------------------------------------------

    async def init_producer_id(self, header: RequestHeader, req: dict[str, Any]) -> dict:
        """An idempotent producer's id: always a fresh one with epoch 0 (Kafka's answer when
        there is no transactional id; a client that asks again after an error gets a new id)."""
        if req["transactional_id"] is not None:
            self.log.info(
                "transactions are not supported",
                api="InitProducerId",
                transactional_id=req["transactional_id"],
            )
            return _producer_id(ErrorCode.INVALID_REQUEST, -1, -1)
        if not may_write_idempotently():
            return _producer_id(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, -1, -1)
        try:
            producer_id = self.allocate_producer_id()
        except (StorageError, OSError) as exc:  # no log dir could record the id block
            self.log.warning("cannot allocate a producer id", error=str(exc))
            return _producer_id(ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1)
        return _producer_id(ErrorCode.NONE, producer_id, 0)


def _check_epochs(
    topics: list[dict[str, Any]],
    name_key: str,
    index_key: str,
    native: Callable[[dict[str, Any]], Any],
) -> tuple[list[tuple[str, list[Any]]], list[tuple[str, int, ErrorCode]]]:
    """Split a request's partitions by the leader-epoch check (module docstring): per topic
    the native items of those that pass, and ``(topic, partition, error)`` of those that fail."""
    checked, refused = [], []
    for topic in topics:
        parts = []
        for p in topic["partitions"]:
            code = epoch_error(p.get("current_leader_epoch", -1))
            if code:
                refused.append((topic[name_key], p[index_key], code))
            else:
                parts.append(native(p))
        checked.append((topic[name_key], parts))
    return checked, refused


async def _ready(value: Any) -> Any:
    return value


def _producer_id(code: ErrorCode, producer_id: int, epoch: int) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "producer_id": producer_id,
        "producer_epoch": epoch,
    }


def _refused(req: dict[str, Any], code: ErrorCode, message: str | None = None) -> m.ProduceResponse:
    """Every partition of a Produce request answered ``code`` with ``base_offset`` -1."""
    return m.ProduceResponse(
        correlation_id=0,  # the Kafka header carries the request's
        topics=[
            m.ProduceTopicResponse(
                name=topic["name"],
                partitions=[
                    m.ProducePartitionResponse(
                        partition_index=part["index"], error_code=code, error_message=message
                    )
                    for part in topic["partition_data"]
                ],
            )
            for topic in req["topic_data"]
        ],
    )


def _fetch_partition_error(partition: int, code: ErrorCode) -> dict:
    return {
        "partition_index": partition,
        "error_code": code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": [],
        "preferred_read_replica": -1,
        "records": b"",
    }


def _fetch_error(code: ErrorCode, session_id: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "session_id": session_id, "responses": []}
