"""One face over three unmodified Kafka clients, so a test can be parametrized over them:
confluent-kafka (librdkafka), kafka-python and aiokafka (driven on a private event loop).

Each :class:`KafkaClient` does admin, produce and assigned-consume calls the way an
application would, with the client's own API, and returns plain values: :class:`Rec` for
records, ``{partition: offset}`` for offsets. A failed call raises :class:`ClientError`
carrying the Kafka error code the client reported *and* the client's own exception type
name, so a test can assert both. Nothing here talks to the broker except through the client.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager, suppress
from typing import Any, NamedTuple

__all__ = ["CLIENTS", "ClientError", "KafkaClient", "Rec", "make_client"]

Headers = list[tuple[str, bytes | None]]


class Rec(NamedTuple):
    """A record as every client sees it: ``headers`` is a list, empty when there are none."""

    key: bytes | None
    value: bytes | None
    headers: Headers = []
    timestamp_ms: int | None = None  # None: the producer stamps it
    offset: int = -1


class ClientError(Exception):
    """A call failed: ``code`` is the Kafka error code, ``kind`` the client's exception type
    (or, for librdkafka, its error name)."""

    def __init__(self, code: int, kind: str, message: str = "") -> None:
        super().__init__(f"{kind} ({code}): {message}")
        self.code = code
        self.kind = kind


# -- the face ----------------------------------------------------------------------------------
class KafkaClient:
    name: str
    codecs: tuple[str, ...]  # compression codecs the client can produce with here
    incremental_alter = True  # the client has IncrementalAlterConfigs (aiokafka has not)
    # legacy AlterConfigs: the client first adds the topic's other overrides (kafka-python)
    legacy_alter_keeps_others = False
    # describe_topics sends Metadata allowing auto-creation (aiokafka)
    describe_auto_creates = False
    null_header_values = True  # kafka-python refuses a header whose value is None

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def close(self) -> None:
        pass

    # admin
    def create_topic(self, name: str, partitions: int = 1, configs: dict | None = None) -> None:
        raise NotImplementedError

    def list_topics(self) -> set[str]:
        raise NotImplementedError

    def describe_topic(self, name: str) -> int:
        """The partition count of ``name`` (``ClientError`` if it does not exist)."""
        raise NotImplementedError

    def describe_configs(self, topic: str) -> dict[str, str | None]:
        raise NotImplementedError

    def alter_configs_incremental(
        self, topic: str, set_: dict[str, str], delete: tuple[str, ...] = ()
    ) -> None:
        raise NotImplementedError

    def alter_configs_legacy(self, topic: str, configs: dict[str, str]) -> None:
        raise NotImplementedError

    def create_partitions(self, topic: str, total: int) -> None:
        raise NotImplementedError

    def delete_topic(self, name: str) -> None:
        raise NotImplementedError

    def delete_records(self, topic: str, partition: int, before: int) -> int:
        """Delete records below ``before``; returns the new low watermark."""
        raise NotImplementedError

    # records
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
        """Send ``records`` in order to one partition, wait up to ``timeout_s`` for every
        delivery; the offsets (``-1`` each with ``acks=0``, which gets no answer)."""
        raise NotImplementedError

    def consume(
        self, topic: str, partition: int, start: int | str, count: int, timeout_s: float = 10.0
    ) -> list[Rec]:
        """``count`` records of one assigned partition from ``start`` (an offset,
        ``"beginning"`` or ``"end"``); fewer if ``timeout_s`` passes first."""
        raise NotImplementedError

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(beginning offset, end offset) of one partition."""
        raise NotImplementedError

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        """The first offset whose timestamp is >= ``timestamp_ms``; ``None`` if none."""
        raise NotImplementedError


def _until(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


# -- confluent-kafka (librdkafka) ----------------------------------------------------------
class ConfluentClient(KafkaClient):
    name = "confluent"
    codecs = ("gzip", "snappy", "lz4", "zstd")
    _BASE = {"socket.timeout.ms": 10000, "log_level": 3}

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        from confluent_kafka.admin import AdminClient

        self.admin = AdminClient({"bootstrap.servers": bootstrap, **self._BASE})

    @staticmethod
    @contextmanager
    def _errors() -> Iterator[None]:
        from confluent_kafka import KafkaException

        try:
            yield
        except KafkaException as exc:
            err = exc.args[0]
            raise ClientError(err.code(), err.name(), err.str()) from exc

    def _one(self, futures: dict) -> Any:
        with self._errors():
            (future,) = futures.values()
            return future.result(timeout=15)

    def create_topic(self, name: str, partitions: int = 1, configs: dict | None = None) -> None:
        from confluent_kafka.admin import NewTopic

        self._one(self.admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})]))

    def list_topics(self) -> set[str]:
        with self._errors():
            return set(self.admin.list_topics(timeout=10).topics)

    def describe_topic(self, name: str) -> int:
        from confluent_kafka import TopicCollection

        description = self._one(self.admin.describe_topics(TopicCollection([name])))
        return len(description.partitions)

    def describe_configs(self, topic: str) -> dict[str, str | None]:
        from confluent_kafka.admin import ConfigResource

        entries = self._one(self.admin.describe_configs([ConfigResource("topic", topic)]))
        return {name: entry.value for name, entry in entries.items()}

    def alter_configs_incremental(
        self, topic: str, set_: dict[str, str], delete: tuple[str, ...] = ()
    ) -> None:
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

        entries = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()
        ] + [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
        resource = ConfigResource("topic", topic, incremental_configs=entries)
        self._one(self.admin.incremental_alter_configs([resource]))

    def alter_configs_legacy(self, topic: str, configs: dict[str, str]) -> None:
        from confluent_kafka.admin import ConfigResource

        self._one(self.admin.alter_configs([ConfigResource("topic", topic, set_config=configs)]))

    def create_partitions(self, topic: str, total: int) -> None:
        from confluent_kafka.admin import NewPartitions

        self._one(self.admin.create_partitions([NewPartitions(topic, total)]))

    def delete_topic(self, name: str) -> None:
        self._one(self.admin.delete_topics([name]))

    def delete_records(self, topic: str, partition: int, before: int) -> int:
        from confluent_kafka import TopicPartition

        result = self._one(self.admin.delete_records([TopicPartition(topic, partition, before)]))
        return result.low_watermark

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
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": str(acks),
                "compression.type": compression or "none",
                "enable.idempotence": idempotent,
                "linger.ms": 5,
                "message.timeout.ms": int(timeout_s * 1000),
                **self._BASE,
            }
        )
        offsets: list[int] = [-2] * len(records)
        errors: list[Any] = []

        def report(index: int) -> Callable[[Any, Any], None]:
            def done(err: Any, msg: Any) -> None:
                if err is not None:
                    errors.append(err)
                else:
                    offsets[index] = msg.offset()

            return done

        for i, rec in enumerate(records):
            producer.produce(
                topic,
                value=rec.value,
                key=rec.key,
                partition=partition,
                headers=rec.headers or None,
                timestamp=rec.timestamp_ms or 0,
                on_delivery=report(i),
            )
        left = producer.flush(timeout_s)
        if errors:
            raise ClientError(errors[0].code(), errors[0].name(), errors[0].str())
        assert left == 0, f"{left} records not delivered"
        return offsets

    def _consumer(self) -> Any:
        from confluent_kafka import Consumer

        return Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "unused-assign-only",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
                **self._BASE,
            }
        )

    def consume(
        self, topic: str, partition: int, start: int | str, count: int, timeout_s: float = 10.0
    ) -> list[Rec]:
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

        offset = {"beginning": OFFSET_BEGINNING, "end": OFFSET_END}.get(start, start)  # type: ignore[call-overload]
        consumer = self._consumer()
        try:
            consumer.assign([TopicPartition(topic, partition, offset)])
            out: list[Rec] = []
            deadline = time.monotonic() + timeout_s
            while len(out) < count and time.monotonic() < deadline:
                msg = consumer.poll(min(0.5, _until(deadline)))
                if msg is None:
                    continue
                if msg.error():
                    with self._errors():
                        from confluent_kafka import KafkaException

                        raise KafkaException(msg.error())
                out.append(
                    Rec(
                        msg.key(),
                        msg.value(),
                        list(msg.headers() or []),
                        msg.timestamp()[1],
                        msg.offset(),
                    )
                )
            return out
        finally:
            consumer.close()

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        from confluent_kafka import TopicPartition

        consumer = self._consumer()
        try:
            with self._errors():
                return consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)
        finally:
            consumer.close()

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        from confluent_kafka import TopicPartition

        consumer = self._consumer()
        try:
            with self._errors():
                (found,) = consumer.offsets_for_times(
                    [TopicPartition(topic, partition, timestamp_ms)], 10
                )
            return None if found.offset < 0 else found.offset
        finally:
            consumer.close()


# -- kafka-python ------------------------------------------------------------------------------
class KafkaPythonClient(KafkaClient):
    name = "kafka-python"
    codecs = ("gzip", "snappy", "lz4", "zstd")
    legacy_alter_keeps_others = True
    null_header_values = False

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        from kafka import KafkaAdminClient

        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)

    def close(self) -> None:
        self.admin.close()

    @staticmethod
    @contextmanager
    def _errors() -> Iterator[None]:
        from kafka.errors import KafkaError

        try:
            yield
        except KafkaError as exc:
            raise ClientError(
                getattr(exc, "errno", -1) or -1, type(exc).__name__, str(exc)
            ) from exc

    def create_topic(self, name: str, partitions: int = 1, configs: dict | None = None) -> None:
        from kafka.admin import NewTopic

        with self._errors():
            self.admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])

    def list_topics(self) -> set[str]:
        with self._errors():
            return set(self.admin.list_topics())

    def describe_topic(self, name: str) -> int:
        from kafka.errors import for_code

        with self._errors():
            (topic,) = self.admin.describe_topics([name])
            if topic["error_code"]:
                raise for_code(topic["error_code"])()
        return len(topic["partitions"])

    def _resource(self, topic: str, configs: dict | None = None) -> Any:
        from kafka.admin import ConfigResource, ConfigResourceType

        return ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)

    def describe_configs(self, topic: str) -> dict[str, str | None]:
        with self._errors():
            found = self.admin.describe_configs([self._resource(topic)], config_filter="all")
        return {k: v["value"] for k, v in found["topic"][topic].items()}

    def alter_configs_incremental(
        self, topic: str, set_: dict[str, str], delete: tuple[str, ...] = ()
    ) -> None:
        with self._errors():
            if set_:
                _alter_result(
                    self.admin.alter_configs(
                        [self._resource(topic, set_)], raise_on_unknown=False, incremental=True
                    )
                )
            if delete:
                _alter_result(
                    self.admin.reset_configs(
                        [self._resource(topic, dict.fromkeys(delete))],
                        raise_on_unknown=False,
                        incremental=True,
                    )
                )

    def alter_configs_legacy(self, topic: str, configs: dict[str, str]) -> None:
        with self._errors():
            _alter_result(
                self.admin.alter_configs(
                    [self._resource(topic, configs)], raise_on_unknown=False, incremental=False
                )
            )

    def create_partitions(self, topic: str, total: int) -> None:
        from kafka.admin import NewPartitions

        with self._errors():
            self.admin.create_partitions({topic: NewPartitions(total)})

    def delete_topic(self, name: str) -> None:
        with self._errors():
            self.admin.delete_topics([name])

    def delete_records(self, topic: str, partition: int, before: int) -> int:
        from kafka.errors import for_code
        from kafka.structs import TopicPartition

        with self._errors():
            tp = TopicPartition(topic, partition)
            found = self.admin.delete_records({tp: before})[tp]
            if found["error_code"]:
                raise for_code(found["error_code"])()
        return found["low_watermark"]

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
        from kafka import KafkaProducer

        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks=acks,
            compression_type=compression,
            enable_idempotence=idempotent,
            linger_ms=5,
            request_timeout_ms=10000,
            max_block_ms=int(timeout_s * 1000),
        )
        try:
            with self._errors():
                futures = [
                    producer.send(
                        topic,
                        value=r.value,
                        key=r.key,
                        headers=r.headers,
                        partition=partition,
                        timestamp_ms=r.timestamp_ms,
                    )
                    for r in records
                ]
                deadline = time.monotonic() + timeout_s
                producer.flush(timeout_s)
                return [f.get(_until(deadline)).offset for f in futures]
        finally:
            producer.close(1)

    def _consumer(self) -> Any:
        from kafka import KafkaConsumer

        return KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
            request_timeout_ms=15000,
        )

    def consume(
        self, topic: str, partition: int, start: int | str, count: int, timeout_s: float = 10.0
    ) -> list[Rec]:
        from kafka.structs import TopicPartition

        consumer = self._consumer()
        tp = TopicPartition(topic, partition)
        try:
            with self._errors():
                consumer.assign([tp])
                if start == "beginning":
                    consumer.seek_to_beginning(tp)
                elif start == "end":
                    consumer.seek_to_end(tp)
                    consumer.position(tp)  # resolve it now, before records are produced
                else:
                    consumer.seek(tp, start)
                out: list[Rec] = []
                deadline = time.monotonic() + timeout_s
                while len(out) < count and time.monotonic() < deadline:
                    polled = consumer.poll(timeout_ms=int(min(500, _until(deadline) * 1000)))
                    for msg in polled.get(tp, []):
                        headers = [(k, v) for k, v in msg.headers]
                        out.append(Rec(msg.key, msg.value, headers, msg.timestamp, msg.offset))
                return out[:count]
        finally:
            consumer.close()

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        from kafka.structs import TopicPartition

        consumer = self._consumer()
        tp = TopicPartition(topic, partition)
        try:
            with self._errors():
                return consumer.beginning_offsets([tp])[tp], consumer.end_offsets([tp])[tp]
        finally:
            consumer.close()

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        from kafka.structs import TopicPartition

        consumer = self._consumer()
        tp = TopicPartition(topic, partition)
        try:
            with self._errors():
                found = consumer.offsets_for_times({tp: timestamp_ms})[tp]
            return None if found is None else found.offset
        finally:
            consumer.close()


def _alter_result(results: dict) -> None:
    """kafka-python's alter_configs answers ``{type: {name: "OK" | str(error)}}``, where an
    error reads ``[Error <code>] <ExceptionName>: ...``: raise the first error."""
    for outcome in (o for by_name in results.values() for o in by_name.values()):
        if outcome != "OK":
            code, _, rest = outcome.removeprefix("[Error ").partition("] ")
            raise ClientError(int(code), rest.partition(":")[0], outcome)


# -- aiokafka ----------------------------------------------------------------------------------
class AioClient(KafkaClient):
    name = "aiokafka"
    codecs = ("gzip", "snappy", "lz4", "zstd")
    incremental_alter = False
    describe_auto_creates = True

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


CLIENTS: dict[str, type[KafkaClient]] = {
    c.name: c for c in (ConfluentClient, KafkaPythonClient, AioClient)
}


def make_client(name: str, bootstrap: str) -> KafkaClient:
    return CLIENTS[name](bootstrap)
