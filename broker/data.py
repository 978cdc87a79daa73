"""The record APIs, shared by both wire protocols: Produce (:mod:`odradek.broker.produce`),
Fetch (:mod:`odradek.broker.fetch`), and here ListOffsets and DeleteRecords.

:class:`DataApi` is what a connection holds: its ``produce_api`` and ``fetch_api`` serve the
data path, its own methods the two requests that only read or move a log's offsets. Which log
a request may reach is :mod:`odradek.broker.record_access`.
"""

from __future__ import annotations

from odradek.broker.context import BrokerContext
from odradek.broker.errors import PolicyViolationError, error_code_for
from odradek.broker.fetch import FetchApi
from odradek.broker.produce import ProduceApi
from odradek.broker.record_access import client_writable_log, partition_log
from odradek.protocol import messages as m
from odradek.protocol.acl import Operation
from odradek.protocol.compression import CompressionError
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import CorruptRecordError
from odradek.protocol.validate import stored_batch_bound
from odradek.storage.errors import OffsetOutOfRangeError, StorageError
from odradek.storage.timestamp_lookup import offset_for_timestamp

__all__ = ["DataApi"]

HIGH_WATERMARK = -1  # DeleteRecords: delete every record below the high watermark


class DataApi:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.produce_api = ProduceApi(ctx)
        self.fetch_api = FetchApi(ctx)

    async def list_offsets(self, req: m.ListOffsetsRequest) -> m.ListOffsetsResponse:
        max_body_bytes = stored_batch_bound(self.ctx.config.int("message.max.decompressed.bytes"))
        topics = []
        for topic in req.topics:
            parts = []
            for lp in topic.partitions:
                result = m.ListOffsetsPartitionResponse(partition_index=lp.partition_index)
                parts.append(result)
                if lp.timestamp < 0 and lp.timestamp not in (
                    m.LATEST_TIMESTAMP,
                    m.EARLIEST_TIMESTAMP,
                    m.MAX_TIMESTAMP,
                ):
                    result.error_code = ErrorCode.INVALID_REQUEST
                    continue
                try:
                    log = partition_log(
                        self.ctx, topic.name, lp.partition_index, Operation.DESCRIBE
                    )
                    found = offset_for_timestamp(log, lp.timestamp, max_body_bytes)
                    if found is not None:
                        result.offset, result.timestamp = found
                except (StorageError, OSError) as exc:
                    result.error_code = error_code_for(exc)
                except (CorruptRecordError, CompressionError) as exc:  # a batch stored damaged
                    result.error_code = error_code_for(exc)
                    self.ctx.log.warning(
                        "unreadable batch",
                        topic=topic.name,
                        partition=lp.partition_index,
                        reason=str(exc),
                    )
            topics.append(m.ListOffsetsTopicResponse(name=topic.name, partitions=parts))
        return m.ListOffsetsResponse(correlation_id=req.correlation_id, topics=topics)

    async def delete_records(self, req: m.DeleteRecordsRequest) -> m.DeleteRecordsResponse:
        topics = []
        for topic in req.topics:
            parts = []
            for dp in topic.partitions:
                result = m.DeleteRecordsPartitionResult(partition_index=dp.partition_index)
                try:
                    log = client_writable_log(
                        self.ctx,
                        topic.name,
                        dp.partition_index,
                        "delete records of",
                        Operation.DELETE,
                    )
                    if not log.config.delete:  # as Kafka's Partition.deleteRecordsOnLeader
                        raise PolicyViolationError(
                            f"records of {topic.name}-{dp.partition_index} cannot be deleted: "
                            f"cleanup.policy is {','.join(log.config.cleanup_policy)}"
                        )
                    offset = log.high_watermark if dp.offset == HIGH_WATERMARK else dp.offset
                    if offset < 0:  # Kafka: of the negative offsets only -1 has a meaning
                        raise OffsetOutOfRangeError(
                            offset, log.log_start_offset, log.high_watermark
                        )
                    result.low_watermark = log.advance_log_start_offset(offset)
                except (StorageError, OSError) as exc:
                    result.error_code = error_code_for(exc)
                parts.append(result)
            topics.append(m.DeleteRecordsTopicResult(name=topic.name, partitions=parts))
        await self.ctx.checkpoint()  # a DeleteRecords must survive a crash
        return m.DeleteRecordsResponse(correlation_id=req.correlation_id, topics=topics)
