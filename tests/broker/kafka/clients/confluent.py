"""confluent-kafka (librdkafka 2.x) behind :class:`KafkaClient`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.broker.kafka.clients.base import ClientError, KafkaClient, Rec
from tests.broker.kafka.clients.base import until as _until


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

    def list_groups(self) -> dict[str, str]:
        with self._errors():
            found = self.admin.list_consumer_groups().result(timeout=15)
        assert not found.errors, found.errors
        return {g.group_id: _state(g.state) for g in found.valid}

    def describe_group(self, group: str) -> tuple[str, int]:
        described = self._one(self.admin.describe_consumer_groups([group]))
        return _state(described.state), len(described.members)

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        found = self._one(
            self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
        )
        return {(tp.topic, tp.partition): tp.offset for tp in found.topic_partitions}

    def delete_groups(self, groups: list[str]) -> dict[str, int]:
        from confluent_kafka import KafkaException

        codes = {}
        for group, future in self.admin.delete_consumer_groups(groups).items():
            try:
                future.result(timeout=15)
                codes[group] = 0
            except KafkaException as exc:
                codes[group] = exc.args[0].code()
        return codes

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


def _state(state: Any) -> str:
    """librdkafka's ``ConsumerGroupState.PREPARING_REBALANCING`` as Kafka names it."""
    return {
        "PREPARING_REBALANCING": "PreparingRebalance",
        "COMPLETING_REBALANCING": "CompletingRebalance",
    }.get(state.name, state.name.title())
