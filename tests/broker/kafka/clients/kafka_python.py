"""kafka-python 3 behind :class:`KafkaClient`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.broker.kafka.clients.base import ClientError, KafkaClient, Rec
from tests.broker.kafka.clients.base import until as _until


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

    def list_groups(self) -> dict[str, str]:
        with self._errors():
            return {g["group_id"]: g["group_state"] for g in self.admin.list_groups()}

    def describe_group(self, group: str) -> tuple[str, int]:
        with self._errors():
            described = self.admin.describe_groups([group])[group]
        return described["group_state"], len(described["members"])

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        with self._errors():
            found = self.admin.list_group_offsets({group: None})[group]
        return {(tp.topic, tp.partition): om.offset for tp, om in found.items()}

    def delete_groups(self, groups: list[str]) -> dict[str, int]:
        import kafka.errors

        with self._errors():
            answers = self.admin.delete_groups(groups)
        # each answer is "OK" or the name of the error's class in kafka.errors
        return {
            group: 0 if outcome == "OK" else getattr(kafka.errors, outcome).errno
            for group, outcome in answers.items()
        }

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
