"""Consumer-group members of the three unmodified Kafka clients, each polling on a thread of
its own (a rebalance needs every member to keep polling while the others join).

A :class:`Member` subscribes to topics in a group, keeps polling until :meth:`Member.close`,
records what it received, and commits synchronously after every poll that returned records,
so the group's committed offsets follow what was consumed. ``assigned`` is the member's
current assignment as ``{(topic, partition)}``, read by the test's thread.

``commit_assigned`` is the other way to commit: a consumer that assigns partitions itself
(no membership, generation -1) commits an offset for a group, as tools do.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

__all__ = ["Member", "commit_assigned", "committed", "start_member"]

_POLL_S = 0.2


class Member:
    name: str

    def __init__(self, bootstrap: str, group: str, topics: list[str]) -> None:
        self.bootstrap, self.group, self.topics = bootstrap, group, topics
        self.records: list[tuple[str, int, int, bytes | None]] = []  # topic, partition, offset
        self.assigned: set[tuple[str, int]] = set()
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True, name=f"member-{group}")

    def start(self) -> Member:
        self._thread.start()
        return self

    def close(self) -> None:
        """Leave the group (the client's close sends LeaveGroup) and stop the thread."""
        self._stop.set()
        self._thread.join(10)

    def _main(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # the test reads it
            self.errors.append(exc)

    def _run(self) -> None:
        raise NotImplementedError


class ConfluentMember(Member):
    name = "confluent"

    def _run(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
                "fetch.wait.max.ms": 100,
                "log_level": 3,
            }
        )
        consumer.subscribe(self.topics)
        try:
            while not self._stop.is_set():
                msg = consumer.poll(_POLL_S)
                self.assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
                if msg is None or msg.error():
                    continue
                self.records.append((msg.topic(), msg.partition(), msg.offset(), msg.value()))
                consumer.commit(asynchronous=False)
        finally:
            consumer.close()


class KafkaPythonMember(Member):
    name = "kafka-python"

    def _run(self) -> None:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(
            *self.topics,
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            fetch_max_wait_ms=100,
        )
        try:
            while not self._stop.is_set():
                polled = consumer.poll(timeout_ms=int(_POLL_S * 1000))
                self.assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
                for msgs in polled.values():
                    self.records += [(m.topic, m.partition, m.offset, m.value) for m in msgs]
                if polled:
                    consumer.commit()
        finally:
            consumer.close()


class AioMember(Member):
    name = "aiokafka"

    def _run(self) -> None:
        asyncio.run(self._arun())

    async def _arun(self) -> None:
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer(
            *self.topics,
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            fetch_max_wait_ms=100,
        )
        await consumer.start()
        try:
            while not self._stop.is_set():
                polled = await consumer.getmany(timeout_ms=int(_POLL_S * 1000))
                self.assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
                for msgs in polled.values():
                    self.records += [(m.topic, m.partition, m.offset, m.value) for m in msgs]
                if polled:
                    await consumer.commit()
        finally:
            await consumer.stop()


MEMBERS: dict[str, type[Member]] = {
    m.name: m for m in (ConfluentMember, KafkaPythonMember, AioMember)
}


def start_member(name: str, bootstrap: str, group: str, topics: list[str]) -> Member:
    return MEMBERS[name](bootstrap, group, topics).start()


def commit_assigned(name: str, bootstrap: str, group: str, topic: str, offset: int) -> None:
    """Commit ``offset`` for partition 0 of ``topic`` in ``group`` without joining it."""
    if name == "confluent":
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
        try:
            consumer.assign([TopicPartition(topic, 0)])
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        finally:
            consumer.close()
    elif name == "kafka-python":
        from kafka import KafkaConsumer
        from kafka.structs import OffsetAndMetadata, TopicPartition

        kp = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        try:
            tp = TopicPartition(topic, 0)
            kp.assign([tp])
            kp.commit({tp: OffsetAndMetadata(offset, "", -1)})
        finally:
            kp.close()
    else:
        _aio(_aio_commit(bootstrap, group, topic, offset))


def committed(name: str, bootstrap: str, group: str, topic: str) -> int | None:
    """The group's committed offset of partition 0 of ``topic``, as the client reads it."""
    if name == "confluent":
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
        try:
            (found,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
            return None if found.offset < 0 else found.offset
        finally:
            consumer.close()
    if name == "kafka-python":
        from kafka import KafkaConsumer
        from kafka.structs import TopicPartition

        kp = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        try:
            return kp.committed(TopicPartition(topic, 0))
        finally:
            kp.close()
    return _aio(_aio_committed(bootstrap, group, topic))


def _aio(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


async def _aio_commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.commit({tp: offset})
    finally:
        await consumer.stop()


async def _aio_committed(bootstrap: str, group: str, topic: str) -> int | None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        return await consumer.committed(tp)
    finally:
        await consumer.stop()
