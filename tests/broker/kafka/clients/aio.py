"""aiokafka behind :class:`KafkaClient`, driven on a private event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from contextlib import suppress
from typing import Any

from tests.broker.kafka.clients.base import ClientError, KafkaClient, Rec
from tests.broker.kafka.clients.base import until as _until


class AioClient(KafkaClient):
    name = "aiokafka"
    codecs = ("gzip", "snappy", "lz4", "zstd")
    incremental_alter = False
    describe_auto_creates = True
    deletes_groups = False

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        from aiokafka.admin import AIOKafkaAdminClient

        self.loop = asyncio.new_event_loop()

        async def start() -> AIOKafkaAdminClient:  # aiokafka's objects need a running loop
            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
            await admin.start()
            return admin

        self.admin = self.run(start())

    def run(self, coro: Coroutine[Any, Any, Any], timeout_s: float = 30.0) -> Any:
        from aiokafka.errors import KafkaError

        try:
            return self.loop.run_until_complete(asyncio.wait_for(coro, timeout_s))
        except KafkaError as exc:
            raise ClientError(
                getattr(exc, "errno", -1) or -1, type(exc).__name__, str(exc)
            ) from exc

    def close(self) -> None:
        with suppress(Exception):
            self.run(self.admin.close())
        self.loop.close()

    @staticmethod
    def _check(code: int, message: str | None = None) -> None:
        if code:
            from aiokafka.errors import for_code

            error = for_code(code)
            raise ClientError(code, error.__name__, message or "")

    def create_topic(self, name: str, partitions: int = 1, configs: dict | None = None) -> None:
        from aiokafka.admin import NewTopic

        topic = NewTopic(name, partitions, 1, topic_configs=configs or {})
        response = self.run(self.admin.create_topics([topic]))
        for _, code, message in response.topic_errors:
            self._check(code, message)

    def list_topics(self) -> set[str]:
        return set(self.run(self.admin.list_topics()))

    def describe_topic(self, name: str) -> int:
        (topic,) = self.run(self.admin.describe_topics([name]))
        self._check(topic["error_code"])
        return len(topic["partitions"])

    def _resource(self, topic: str, configs: dict | None = None) -> Any:
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        return ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)

    def describe_configs(self, topic: str) -> dict[str, str | None]:
        (response,) = self.run(self.admin.describe_configs([self._resource(topic)]))
        ((code, message, _, _, entries),) = response.resources
        self._check(code, message)
        return {entry[0]: entry[1] for entry in entries}

    def alter_configs_legacy(self, topic: str, configs: dict[str, str]) -> None:
        (response,) = self.run(self.admin.alter_configs([self._resource(topic, configs)]))
        for code, message, *_ in response.resources:
            self._check(code, message)

    def create_partitions(self, topic: str, total: int) -> None:
        from aiokafka.admin import NewPartitions

        response = self.run(self.admin.create_partitions({topic: NewPartitions(total)}))
        for _, code, message in response.topic_errors:
            self._check(code, message)

    def delete_topic(self, name: str) -> None:
        response = self.run(self.admin.delete_topics([name]))
        for _, code in response.topic_error_codes:
            self._check(code)

    def delete_records(self, topic: str, partition: int, before: int) -> int:
        from aiokafka.admin.records_to_delete import RecordsToDelete
        from aiokafka.structs import TopicPartition

        tp = TopicPartition(topic, partition)
        return self.run(self.admin.delete_records({tp: RecordsToDelete(before)}))[tp]

    def list_groups(self) -> dict[str, str]:
        listed = {group for group, _protocol_type in self.run(self.admin.list_consumer_groups())}
        return {group: self.describe_group(group)[0] for group in listed}  # the list has no state

    def describe_group(self, group: str) -> tuple[str, int]:
        (response,) = self.run(self.admin.describe_consumer_groups([group]))
        ((code, _group, state, _ptype, _protocol, members),) = response.groups
        self._check(code)
        return state, len(members)

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        found = self.run(self.admin.list_consumer_group_offsets(group))
        return {(tp.topic, tp.partition): om.offset for tp, om in found.items()}

    def produce(
        self,
        topic: str,
        records: list[Rec],
        *,
        partition: int = 0,
        acks: int | str = "all",
        compression: str | None = None,
        idempotent: bool = False,
        timeout_s: float = 15.0,
    ) -> list[int]:
        from aiokafka import AIOKafkaProducer

        async def go() -> list[int]:
            producer = AIOKafkaProducer(
                bootstrap_servers=self.bootstrap,
                acks=acks,
                compression_type=compression,
                enable_idempotence=idempotent,
                linger_ms=5,
                request_timeout_ms=10000,
            )
            await producer.start()
            try:
                futures = [
                    await producer.send(
                        topic,
                        value=r.value,
                        key=r.key,
                        partition=partition,
                        timestamp_ms=r.timestamp_ms,
                        headers=r.headers or None,
                    )
                    for r in records
                ]
                done = [await f for f in futures]
                return [-1 if md is None else md.offset for md in done]  # None: acks=0
            finally:
                await producer.stop()

        return self.run(go(), timeout_s)

    def _consumer(self) -> Any:
        from aiokafka import AIOKafkaConsumer

        return AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
            request_timeout_ms=15000,
        )

    def consume(
        self, topic: str, partition: int, start: int | str, count: int, timeout_s: float = 10.0
    ) -> list[Rec]:
        from aiokafka.structs import TopicPartition

        tp = TopicPartition(topic, partition)

        async def go() -> list[Rec]:
            consumer = self._consumer()
            await consumer.start()
            try:
                consumer.assign([tp])
                if start == "beginning":
                    await consumer.seek_to_beginning(tp)
                elif start == "end":
                    await consumer.seek_to_end(tp)
                    await consumer.position(tp)
                else:
                    consumer.seek(tp, start)
                out: list[Rec] = []
                deadline = time.monotonic() + timeout_s
                while len(out) < count and time.monotonic() < deadline:
                    got = await consumer.getmany(
                        tp, timeout_ms=int(min(500, _until(deadline) * 1000))
                    )
                    for msg in got.get(tp, []):
                        headers = [(k, v) for k, v in msg.headers]
                        out.append(Rec(msg.key, msg.value, headers, msg.timestamp, msg.offset))
                return out[:count]
            finally:
                await consumer.stop()

        return self.run(go())

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        from aiokafka.structs import TopicPartition

        tp = TopicPartition(topic, partition)

        async def go() -> tuple[int, int]:
            consumer = self._consumer()
            await consumer.start()
            try:
                return (await consumer.beginning_offsets([tp]))[tp], (
                    await consumer.end_offsets([tp])
                )[tp]
            finally:
                await consumer.stop()

        return self.run(go())

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        from aiokafka.structs import TopicPartition

        tp = TopicPartition(topic, partition)

        async def go() -> int | None:
            consumer = self._consumer()
            await consumer.start()
            try:
                found = (await consumer.offsets_for_times({tp: timestamp_ms}))[tp]
                return None if found is None else found.offset
            finally:
                await consumer.stop()

        return self.run(go())
