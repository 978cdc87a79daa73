"""What each console page shows, asked of the broker through the async client.

Every function here takes an :class:`~odradek.client.AsyncAdmin` (and, for the message
browser, an :class:`~odradek.client.AsyncClient`) and returns plain JSON-able dicts; the
HTTP layer (:mod:`odradek.console.app`) only serializes them. Nothing here escapes text for
HTML: the pages put every value into the DOM with ``textContent`` (see :mod:`odradek.console`).

The broker is seen as any client sees it: topics, partitions and their log start / end
offsets (Metadata + ListOffsets through ``describe_topics``), sizes per partition and log dir
(DescribeLogDirs), configs (DescribeConfigs), groups (ListGroups, DescribeGroups,
OffsetFetch). Segment files are not visible to a client: see :func:`partition_detail`.
"""

from __future__ import annotations

from typing import Any

from odradek.client import (
    AsyncAdmin,
    AsyncClient,
    GroupDescription,
    NewTopic,
    TopicPartition,
)
from odradek.client.offset_reset import INACTIVE_GROUP_STATES, plan_reset
from odradek.client.records import BatchCursor
from odradek.console.records import render_record

MAX_MESSAGES_PER_PAGE = 200
FETCH_PARTITION_MAX_BYTES = 1 << 20  # the broker still returns a larger first batch whole
RESET_TARGETS = ("earliest", "latest", "offset", "timestamp")  # what the console offers
EARLIEST, LATEST = -2, -1  # ListOffsets' special timestamps: log start, log end offset


async def _log_offsets(
    admin: AsyncAdmin, tps: list[TopicPartition], timestamp_ms: int
) -> dict[TopicPartition, int]:
    """ListOffsets: the offset of each partition for ``timestamp_ms`` (or EARLIEST / LATEST);
    a partition with no such record is left out."""
    found = await admin.list_offsets(dict.fromkeys(tps, timestamp_ms))
    return {tp: hit.offset for tp, hit in found.items() if hit is not None}


async def _sizes_bytes(admin: AsyncAdmin) -> dict[TopicPartition, tuple[str, int]]:
    """Each partition's log dir and the size of its ``.log`` files (DescribeLogDirs)."""
    found: dict[TopicPartition, tuple[str, int]] = {}
    for log_dir, described in (await admin.describe_log_dirs()).items():
        for tp, size_bytes in described.partitions.items():
            found[tp] = (log_dir, size_bytes)
    return found


async def topics_overview(admin: AsyncAdmin) -> dict[str, Any]:
    """Every topic (internal ones last) with partition count, record count and size."""
    described = await admin.describe_topics(None)
    sizes = await _sizes_bytes(admin)
    topics = []
    for topic in sorted(described, key=lambda t: (t.internal, t.name)):
        records = sum((p.high_watermark or 0) - (p.log_start_offset or 0) for p in topic.partitions)
        size_bytes = sum(
            sizes.get(TopicPartition(topic.name, p.partition), ("", 0))[1] for p in topic.partitions
        )
        topics.append(
            {
                "name": topic.name,
                "internal": topic.internal,
                "partitions": len(topic.partitions),
                "records": records,
                "size_bytes": size_bytes,
            }
        )
    return {"topics": topics}


async def topic_detail(admin: AsyncAdmin, name: str) -> dict[str, Any]:
    """One topic: its partitions' offsets, sizes and log dirs, and its configs."""
    (topic,) = await admin.describe_topics([name])
    sizes = await _sizes_bytes(admin)
    partitions = []
    for p in sorted(topic.partitions):
        log_dir, size_bytes = sizes.get(TopicPartition(name, p.partition), ("", 0))
        partitions.append(
            {
                "partition": p.partition,
                "log_start_offset": p.log_start_offset,
                "log_end_offset": p.high_watermark,
                "records": (p.high_watermark or 0) - (p.log_start_offset or 0),
                "size_bytes": size_bytes,
                "log_dir": log_dir,
            }
        )
    configs = await admin.describe_configs(name)
    return {
        "name": name,
        "internal": topic.internal,
        "partitions": partitions,
        "configs": [
            {
                "name": entry.name,
                "value": None if entry.sensitive else entry.value,
                "is_default": entry.is_default,
                "read_only": entry.read_only,
            }
            for entry in sorted(configs.values())
        ],
    }


async def partition_detail(admin: AsyncAdmin, topic: str, partition: int) -> dict[str, Any]:
    """One partition: offsets, size and log dir, and its segment files (oldest first; the
    last one is active), as the broker lists them (``Admin.describe_segments``)."""
    detail = await topic_detail(admin, topic)
    for p in detail["partitions"]:
        if p["partition"] == partition:
            configs = {c["name"]: c["value"] for c in detail["configs"]}
            segments = (await admin.describe_segments(topic)).get(partition, [])
            ends = [s.base_offset for s in segments[1:]] + [p["log_end_offset"]]
            return {
                "topic": topic,
                **p,
                "segment_bytes": configs.get("segment.bytes"),
                "segments": [
                    {
                        "file": segment.file_name,
                        "base_offset": segment.base_offset,
                        "next_offset": end,  # the next segment's base, or the log end
                        "size_bytes": segment.size_bytes,
                        "largest_timestamp_ms": segment.largest_timestamp_ms,
                        "active": i == len(segments) - 1,
                    }
                    for i, (segment, end) in enumerate(zip(segments, ends, strict=True))
                ],
            }
    raise ValueError(f"topic {topic!r} has no partition {partition}")


async def read_messages(
    admin: AsyncAdmin,
    client: AsyncClient,
    tp: TopicPartition,
    *,
    offset: int | None = None,
    timestamp_ms: int | None = None,
    limit: int = 20,
    value_format: str = "text",
    shown_bytes: int = 2048,
) -> dict[str, Any]:
    """Up to ``limit`` records of ``tp`` from ``offset`` (clamped to the log), or from the
    first record whose timestamp is at or after ``timestamp_ms`` (ListOffsets), each field
    rendered by :func:`odradek.console.records.render_record`."""
    limit = max(1, min(limit, MAX_MESSAGES_PER_PAGE))
    log_start = (await _log_offsets(admin, [tp], EARLIEST)).get(tp, 0)
    log_end = (await _log_offsets(admin, [tp], LATEST)).get(tp, 0)
    if timestamp_ms is not None:
        found = (await admin.list_offsets({tp: timestamp_ms})).get(tp)
        position = log_end if found is None else found.offset
    else:
        position = log_start if offset is None else min(max(offset, log_start), log_end)
    first = next_offset = position
    records: list[dict[str, Any]] = []
    while len(records) < limit and next_offset < log_end:
        fetch_offset = next_offset
        fetched = (
            await client.fetch_raw(
                {tp: fetch_offset}, max_wait_ms=0, partition_max_bytes=FETCH_PARTITION_MAX_BYTES
            )
        )[tp]
        if fetched.error is not None:
            raise fetched.error
        log_end = max(log_end, fetched.high_watermark)
        cursor = BatchCursor(tp.topic, tp.partition, fetched.records, fetch_offset)
        while len(records) < limit and (batch := cursor.next_records()) is not None:
            taken = batch[: limit - len(records)]  # a batch may be empty: control records
            records += (render_record(r, value_format, shown_bytes) for r in taken)
            cut = len(taken) < len(batch)
            next_offset = taken[-1].offset + 1 if cut else cursor.position
        if cursor.position == fetch_offset:
            break  # nothing whole came back
    return {
        "topic": tp.topic,
        "partition": tp.partition,
        "log_start_offset": log_start,
        "log_end_offset": log_end,
        "first_offset": first,
        "next_offset": next_offset,
        "format": value_format,
        "records": records,
    }


async def groups_overview(admin: AsyncAdmin) -> dict[str, Any]:
    """Every consumer group with its state, member count and total lag."""
    listed = sorted(await admin.list_groups())
    described = await admin.describe_groups([g.group_id for g in listed]) if listed else []
    groups = []
    for group in described:
        lags = (await _group_partitions(admin, group))["partitions"]
        groups.append(
            {
                "group_id": group.group_id,
                "state": group.state,
                "members": len(group.members),
                "lag": sum(p["lag"] or 0 for p in lags),
            }
        )
    return {"groups": groups}


async def _group_partitions(admin: AsyncAdmin, group: GroupDescription) -> dict[str, Any]:
    committed = await admin.list_group_offsets(group.group_id)
    owner = {tp: mb for mb in group.members for tp in mb.assignment}
    partitions = sorted(set(committed) | set(owner))
    ends = await admin.list_offsets(dict.fromkeys(partitions, -1)) if partitions else {}
    rows = []
    for tp in partitions:
        current = committed[tp].offset if tp in committed else None
        hit = ends.get(tp)
        end = None if hit is None else hit.offset
        member = owner.get(tp)
        rows.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "committed_offset": current,
                "log_end_offset": end,
                "lag": None if current is None or end is None else max(0, end - current),
                "member_id": member.member_id if member else None,
            }
        )
    return {"partitions": rows}


async def group_detail(admin: AsyncAdmin, group_id: str) -> dict[str, Any]:
    """One group: state, assignor, members (with assignments) and lag per partition."""
    (group,) = await admin.describe_groups([group_id])
    return {
        "group_id": group.group_id,
        "state": group.state,
        "assignor": group.assignor,
        "members": [
            {
                "member_id": mb.member_id,
                "client_id": mb.client_id,
                "client_host": mb.client_host,
                "assignment": [f"{tp.topic}-{tp.partition}" for tp in sorted(mb.assignment)],
            }
            for mb in group.members
        ],
        **await _group_partitions(admin, group),
    }


async def reset_group_offsets(
    admin: AsyncAdmin,
    group_id: str,
    topic: str,
    target: str,
    value: int | None,
    *,
    execute: bool,
) -> dict[str, Any]:
    """New committed offsets of ``group_id`` on every partition of ``topic``: to the
    ``earliest`` / ``latest`` offset, to ``offset`` ``value``, or to the first record at or
    after ``timestamp`` ``value`` (ms), clamped to each log's start and end as Kafka's tool
    does. Committed only if ``execute`` and the group is inactive (Kafka refuses otherwise);
    without ``execute`` this is the preview the confirmation step shows."""
    if target not in RESET_TARGETS:
        raise ValueError(f"reset target must be one of {', '.join(RESET_TARGETS)}")
    if target in ("offset", "timestamp") and value is None:
        raise ValueError(f"a reset to a {target} needs a value")
    (group,) = await admin.describe_groups([group_id])
    if group.state not in INACTIVE_GROUP_STATES:
        raise ValueError(
            f"group {group_id!r} is {group.state}: offsets can only be reset while it has "
            "no members"
        )
    (described,) = await admin.describe_topics([topic])
    tps = [TopicPartition(topic, p.partition) for p in sorted(described.partitions)]
    starts = await _log_offsets(admin, tps, EARLIEST)
    ends = await _log_offsets(admin, tps, LATEST)
    found = await _log_offsets(admin, tps, value) if target == "timestamp" else None
    offsets = plan_reset(target, tps, starts, ends, value=value, found=found)  # type: ignore[arg-type]
    if execute:
        await admin.alter_group_offsets(group_id, offsets)
    return {
        "group_id": group_id,
        "executed": execute,
        "offsets": [
            {"topic": tp.topic, "partition": tp.partition, "offset": off}
            for tp, off in sorted(offsets.items())
        ],
    }


async def create_topic(
    admin: AsyncAdmin, name: str, partitions: int, configs: dict[str, str], *, execute: bool
) -> dict[str, Any]:
    """Create ``name``; without ``execute`` the broker only validates it (CreateTopics
    ``validate_only``), which is the confirmation step's preview. Raises the broker's error
    (``InvalidTopicError``, ``TopicAlreadyExistsError`` ...)."""
    await admin.create_topics([NewTopic(name, partitions, 1, configs)], validate_only=not execute)
    return {"name": name, "partitions": partitions, "configs": configs, "created": execute}
