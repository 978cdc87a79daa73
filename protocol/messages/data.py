"""Messages of the record APIs: Produce and Fetch (with a raw tail of record batches),
ListOffsets, DeleteRecords."""

from __future__ import annotations

from odradek.protocol.messages.base import (
    ACKS_ALL,
    Int16,
    Int32,
    Int64,
    Request,
    Response,
    Size32,
    Str,
    _Item,
)


# ---- Produce (raw tail: record batches) ----------------------------------------------------
class ProducePartitionData(_Item, kw_only=True):
    partition_index: Int32
    records_bytes: Size32  # bytes of this partition's batches in the raw tail


class ProduceTopicData(_Item, kw_only=True):
    name: Str
    partitions: list[ProducePartitionData] = []


class ProduceRequest(Request, tag=0, kw_only=True):
    acks: Int16 = ACKS_ALL  # 0, 1 or -1; anything else is INVALID_REQUIRED_ACKS
    timeout_ms: Size32 = 30_000
    topics: list[ProduceTopicData] = []

    def declared_raw_bytes(self) -> int:
        return sum(p.records_bytes for t in self.topics for p in t.partitions)


class ProducePartitionResponse(_Item, kw_only=True):
    partition_index: Int32
    error_code: Int16 = 0
    error_message: Str | None = None
    base_offset: Int64 = -1
    log_append_time_ms: Int64 = -1  # -1 unless the topic uses LogAppendTime
    log_start_offset: Int64 = -1


class ProduceTopicResponse(_Item, kw_only=True):
    name: Str
    partitions: list[ProducePartitionResponse] = []


class ProduceResponse(Response, tag=0, kw_only=True):
    topics: list[ProduceTopicResponse] = []


# ---- Fetch (raw tail in the response) ------------------------------------------------------
class FetchPartition(_Item, kw_only=True):
    partition_index: Int32
    fetch_offset: Int64
    partition_max_bytes: Size32 = 1_048_576


class FetchTopic(_Item, kw_only=True):
    name: Str
    partitions: list[FetchPartition] = []


class FetchRequest(Request, tag=1, kw_only=True):
    max_wait_ms: Size32 = 500
    min_bytes: Size32 = 1
    max_bytes: Size32 = 52_428_800
    topics: list[FetchTopic] = []


class FetchPartitionResponse(_Item, kw_only=True):
    partition_index: Int32
    error_code: Int16 = 0
    high_watermark: Int64 = -1
    last_stable_offset: Int64 = -1
    log_start_offset: Int64 = -1
    records_bytes: Size32 = 0  # bytes of this partition's batches in the raw tail


class FetchTopicResponse(_Item, kw_only=True):
    name: Str
    partitions: list[FetchPartitionResponse] = []


class FetchResponse(Response, tag=1, kw_only=True):
    topics: list[FetchTopicResponse] = []

    def declared_raw_bytes(self) -> int:
        return sum(p.records_bytes for t in self.topics for p in t.partitions)


# ---- ListOffsets / DeleteRecords -----------------------------------------------------------
class ListOffsetsPartition(_Item, kw_only=True):
    partition_index: Int32
    timestamp: Int64  # LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, or a time in ms


class ListOffsetsTopic(_Item, kw_only=True):
    name: Str
    partitions: list[ListOffsetsPartition] = []


class ListOffsetsRequest(Request, tag=2, kw_only=True):
    topics: list[ListOffsetsTopic] = []


class ListOffsetsPartitionResponse(_Item, kw_only=True):
    partition_index: Int32
    error_code: Int16 = 0
    timestamp: Int64 = -1
    offset: Int64 = -1


class ListOffsetsTopicResponse(_Item, kw_only=True):
    name: Str
    partitions: list[ListOffsetsPartitionResponse] = []


class ListOffsetsResponse(Response, tag=2, kw_only=True):
    topics: list[ListOffsetsTopicResponse] = []


class DeleteRecordsPartition(_Item, kw_only=True):
    partition_index: Int32
    offset: Int64  # delete everything before it; -1: the high watermark


class DeleteRecordsTopic(_Item, kw_only=True):
    name: Str
    partitions: list[DeleteRecordsPartition] = []


class DeleteRecordsRequest(Request, tag=21, kw_only=True):
    topics: list[DeleteRecordsTopic] = []
    timeout_ms: Int32 = 30_000


class DeleteRecordsPartitionResult(_Item, kw_only=True):
    partition_index: Int32
    low_watermark: Int64 = -1
    error_code: Int16 = 0


class DeleteRecordsTopicResult(_Item, kw_only=True):
    name: Str
    partitions: list[DeleteRecordsPartitionResult] = []


class DeleteRecordsResponse(Response, tag=21, kw_only=True):
    topics: list[DeleteRecordsTopicResult] = []
