"""The async face on asyncio, asyncio+uvloop and trio: client, producer, consumer, admin."""

from __future__ import annotations

import anyio
import pytest

from odradek.client import (
    AsyncAdmin,
    AsyncClient,
    AsyncConsumer,
    AsyncProducer,
    InvalidTopicError,
    NewTopic,
    OffsetAndTimestamp,
    OffsetOutOfRangeError,
    RecordMetadata,
    TopicAlreadyExistsError,
    TopicPartition,
)
from odradek.protocol import messages as m

pytestmark = pytest.mark.anyio


async def test_async_client_pipelines_concurrent_calls(bootstrap: str, topic: str) -> None:
    async with AsyncClient(bootstrap) as client:
        meta = await client.metadata([topic], allow_auto_create=True)
        assert meta.topics[topic].partitions == [0]
        results: list[object] = []

        async def one(i: int) -> None:
            if i % 2:
                results.append(await client.list_offsets({TopicPartition(topic, 0): -1}))
            else:  # a long poll that waits its full max_wait_ms, pipelined with the others
                results.append(
                    await client.fetch_raw({TopicPartition(topic, 0): 0}, max_wait_ms=200)
                )

        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(one, i)
        assert len(results) == 10
        response, tail = await client.call(m.ApiVersionsRequest(correlation_id=0))
        assert isinstance(response, m.ApiVersionsResponse) and len(tail) == 0


async def test_async_produce_consume_round_trip(bootstrap: str, topic: str) -> None:
    async with AsyncAdmin(bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, 2)])
        with pytest.raises(TopicAlreadyExistsError):
            await admin.create_topics([NewTopic(topic, 2)])
        assert topic in await admin.list_topics()
    async with AsyncProducer(bootstrap, linger_ms=10, compression_type="lz4") as producer:
        handles = [
            await producer.send(
                topic, b"v%d" % i, key=b"k%d" % i, partition=i % 2, headers=[("i", b"%d" % i)]
            )
            for i in range(200)
        ]
        md = await producer.send_and_wait(topic, None, key=b"tomb", partition=0, timestamp_ms=7)
        assert md == RecordMetadata(topic, 0, 100, 7, 4, -1)  # CreateTime: the record's
        await producer.flush()
        assert all(h.done() for h in handles)
        offsets = [(await h).offset for h in handles]
        assert offsets == [i // 2 for i in range(200)]
        bad = await producer.send("bad/topic", b"x")
        with pytest.raises(InvalidTopicError):
            await bad
        assert await producer.partitions_for(topic) == {0, 1}
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    async with AsyncConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=3000
    ) as consumer:
        consumer.assign(tps)
        got = []
        async for record in consumer:
            got.append(record)
            if len(got) == 201:
                break
        by_partition = {p: [r for r in got if r.partition == p] for p in (0, 1)}
        assert [r.value for r in by_partition[1]] == [b"v%d" % i for i in range(1, 200, 2)]
        assert by_partition[0][-1].value is None and by_partition[0][-1].timestamp == 7
        assert by_partition[1][0].headers == [("i", b"1")]
        assert await consumer.position(tps[0]) == 101
        assert await consumer.end_offsets(tps) == {tps[0]: 101, tps[1]: 100}
        assert await consumer.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
        found = await consumer.offsets_for_times({tps[0]: 0, tps[1]: 10**13})
        assert found[tps[0]].offset == 0 and found[tps[1]] is None  # type: ignore[union-attr]
        consumer.seek(tps[1], 98)
        batch = await consumer.getmany(timeout_ms=3000)
        assert [r.offset for r in batch[tps[1]]] == [98, 99]
        await consumer.seek_to_beginning(tps[0])
        first = await consumer.getone()
        assert (first.partition, first.offset) == (0, 0)
        assert await consumer.getmany(timeout_ms=0) is not None


async def test_async_consumer_waits_for_new_records(bootstrap: str, topic: str) -> None:
    async with AsyncProducer(bootstrap) as producer:
        await producer.send_and_wait(topic, b"old")
        async with AsyncConsumer(bootstrap_servers=bootstrap) as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            assert await consumer.position(TopicPartition(topic, 0)) == 1  # latest
            assert await consumer.getmany(timeout_ms=100) == {}
            await producer.send_and_wait(topic, b"new")
            with anyio.fail_after(10):
                record = await consumer.getone()
            assert record.value == b"new"


async def test_async_admin_configs_and_records(bootstrap: str, topic: str) -> None:
    async with AsyncAdmin(bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, 1)])
        await admin.alter_configs(topic, set={"retention.ms": "1000000"})
        assert (await admin.describe_configs(topic))["retention.ms"].value == "1000000"
        await admin.create_partitions({topic: 2})
        [desc] = await admin.describe_topics([topic])
        assert len(desc.partitions) == 2
        tp = TopicPartition(topic, 0)
        assert (await admin.list_offsets({tp: -1}))[tp] == OffsetAndTimestamp(0, -1)
        assert await admin.delete_records({tp: -1}) == {tp: 0}
        assert await admin.describe_log_dirs()
        await admin.delete_topics([topic])
        assert topic not in await admin.list_topics()


async def test_a_failing_fetch_loop_reports_its_error_once_and_seek_clears_it(
    bootstrap: str, topic: str
) -> None:
    """With auto_offset_reset="none" and no position, the background fetch loop fails every
    backoff cycle; the error must be queued once, and a seek makes it obsolete."""
    async with AsyncAdmin(bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, 1)])
    async with AsyncProducer(bootstrap) as producer:
        for i in range(3):
            await producer.send_and_wait(topic, b"%d" % i, partition=0)
    tp = TopicPartition(topic, 0)
    async with AsyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([tp])
        with anyio.fail_after(10):
            while not consumer._fetcher.errors:  # the loop has failed at least once
                await anyio.sleep(0.01)
        await anyio.sleep(0.5)  # several more backoff cycles
        assert len(consumer._fetcher.errors) == 1
        consumer.seek(tp, 0)
        got = await consumer.getmany(timeout_ms=5000)
        assert [r.value for r in got[tp]] == [b"0", b"1", b"2"]


async def two_partitions(
    bootstrap: str, topic: str, count: int
) -> tuple[TopicPartition, TopicPartition]:
    """``topic`` with two partitions and the records ``b"0"``, ``b"1"``, ... ``count - 1``,
    the even ones in partition 0 and the odd ones in partition 1."""
    async with AsyncAdmin(bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, 2)])
    async with AsyncProducer(bootstrap) as producer:
        for i in range(count):
            await producer.send(topic, b"%d" % i, partition=i % 2)
    return TopicPartition(topic, 0), TopicPartition(topic, 1)


async def test_getmany_of_given_partitions_leaves_the_others_buffered(
    bootstrap: str, topic: str
) -> None:
    """aiokafka's ``getmany(*partitions)``: records of those partitions only; what was fetched
    for the others stays buffered (their positions unmoved) for a later call; a partition not
    assigned just has no records."""
    tp0, tp1 = await two_partitions(bootstrap, topic, 6)
    async with AsyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp0, tp1])
        # both partitions are fetched by the first Fetch (the producer closed before it)
        got = await consumer.getmany(tp1, timeout_ms=5000)
        assert got == {tp1: got[tp1]} and [r.value for r in got[tp1]] == [b"1", b"3", b"5"]
        assert await consumer.position(tp0) == 0
        got = await consumer.getmany((topic, 0), timeout_ms=0, max_records=2)  # buffered
        assert got == {tp0: got[tp0]} and [r.value for r in got[tp0]] == [b"0", b"2"]
        assert await consumer.getmany(TopicPartition(topic, 7), timeout_ms=100) == {}
        got = await consumer.getmany(tp1, tp0, timeout_ms=0)
        assert got == {tp0: got[tp0]} and [r.value for r in got[tp0]] == [b"4"]
        assert await consumer.position(tp0) == 3 and await consumer.position(tp1) == 3


async def test_getone_of_given_partitions(bootstrap: str, topic: str) -> None:
    """aiokafka's ``getone(*partitions)``: the next record of those partitions; the records
    already taken for another call stay in order for it."""
    tp0, tp1 = await two_partitions(bootstrap, topic, 6)
    async with AsyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp0, tp1])
        with anyio.fail_after(10):
            assert (await consumer.getone(tp1)).value == b"1"
            assert (await consumer.getone(tp0)).value == b"0"
            assert (await consumer.getone(tp1)).value == b"3"
            rest = [(await consumer.getone()).value for _ in range(3)]
        assert sorted(rest) == [b"2", b"4", b"5"]
        assert rest.index(b"2") < rest.index(b"4")


class BodyFailed(Exception):
    """Raised inside ``async with`` by the test below."""


async def test_an_exception_in_the_body_comes_out_as_itself(bootstrap: str, topic: str) -> None:
    """Leaving ``async with`` by an exception: the face's task group winds down (the producer
    still delivers what was queued) and the exception comes out as itself, not in an
    ExceptionGroup."""
    with pytest.raises(BodyFailed):
        async with AsyncProducer(bootstrap, linger_ms=60_000) as producer:
            handle = await producer.send(topic, b"queued before the failure")
            raise BodyFailed
    assert (await handle).offset == 0
    with pytest.raises(BodyFailed):
        async with AsyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, 0)])
            assert len((await c.getmany(timeout_ms=5000))[TopicPartition(topic, 0)]) == 1
            raise BodyFailed


async def test_getmany_of_given_partitions_raises_only_their_errors(
    bootstrap: str, topic: str
) -> None:
    """An error that belongs to one partition (its fetch offset out of range, with no reset
    policy) is raised by a ``getmany`` that asks for it, or for every partition; not by one
    that asks for the other partition only (aiokafka's ``getmany``)."""
    tp0, tp1 = await two_partitions(bootstrap, topic, 4)
    async with AsyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([tp0, tp1])
        consumer.seek(tp0, 0)
        consumer.seek(tp1, 1_000)  # past its end: OFFSET_OUT_OF_RANGE, no policy to reset by
        records: list[bytes] = []
        with anyio.fail_after(10):
            while len(records) < 2:
                got = await consumer.getmany(tp0, timeout_ms=200)
                records += [r.value for r in got.get(tp0, [])]
        assert records == [b"0", b"2"]
        with anyio.fail_after(10):
            while True:  # the error is queued once tp1's fetch is answered
                try:
                    await consumer.getmany(timeout_ms=200)
                except OffsetOutOfRangeError:
                    break
