"""Option parsing and validation, with the names and rules of Spark's Kafka source.

Spark hands a data source its options as a case-insensitive map (keys lower-cased); every
error here is an :class:`OdradekOptionError` whose message starts with the option's name as a
user spells it (``subscribe``, ``startingOffsets``, ...), so a bad option is easy to find.

Offsets follow Kafka's conventions: ``-2`` is *earliest* (the log start offset), ``-1``
*latest* (the log end offset). An offset specification is one of: ``earliest``, ``latest``,
a JSON object ``{"topic": {"0": 23, "1": -2}}``, one timestamp in ms for every partition
(``startingTimestamp``), or a JSON object of timestamps per partition
(``startingOffsetsByTimestamp``). As in Spark, a timestamp option wins over an offsets option.

As in Spark's Kafka source, options prefixed ``kafka.`` are the client's Kafka properties:
``kafka.bootstrap.servers``, and the connection's security (``kafka.security.protocol``,
``kafka.ssl.truststore.location``, ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``, ...:
:func:`odradek.client.security.options_from_properties`), which the driver and every executor
use. A ``kafka.`` property the client does not know is an error naming it, not ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from odradek.client.security import options_from_properties
from odradek.spark.option_values import (
    EARLIEST,
    LATEST,
    OdradekOptionError,
    TopicPartition,
    get_option,
    int_value,
    parse_bool,
    parse_int,
    parse_offsets_json,
    parse_partitions_json,
)

__all__ = ["OffsetSpec", "ReadOptions", "Subscription", "WriteOptions"]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

SubscriptionKind = Literal["subscribe", "subscribePattern", "assign"]


def _bootstrap(options: Mapping[str, str]) -> str:
    raw = get_option(options, "bootstrap.servers") or get_option(options, "kafka.bootstrap.servers")
    if raw is None:
        return DEFAULT_BOOTSTRAP
    servers = [s.strip() for s in raw.split(",") if s.strip()]
    if not servers:
        raise OdradekOptionError("bootstrap.servers", "is empty")
    for server in servers:
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise OdradekOptionError("bootstrap.servers", f"expected host:port, got {server!r}")
    return ",".join(servers)


_KAFKA = "kafka."


_READER_PROPERTIES = frozenset(("bootstrap.servers", "fetch.max.bytes"))
_WRITER_PROPERTIES = frozenset(
    ("bootstrap.servers", "acks", "compression.type", "linger.ms", "batch.size")
)


def _client_options(options: Mapping[str, str], own: frozenset[str]) -> tuple[tuple[str, Any], ...]:
    """The ``kafka.``-prefixed properties other than ``own`` (those the source reads itself),
    as client options (``security_protocol``, ``ssl_cafile``, ...); sorted pairs, so they
    pickle to executors and compare equal."""
    properties = {}
    for key, value in options.items():
        lowered = key.lower()
        if lowered.startswith(_KAFKA) and lowered[len(_KAFKA) :] not in own:
            properties[lowered[len(_KAFKA) :]] = "" if value is None else str(value)
    for name, value in properties.items():  # one at a time: the error names the culprit
        try:
            options_from_properties({name: value})
        except ValueError as exc:
            raise OdradekOptionError(_KAFKA + name, str(exc)) from None
    return tuple(sorted(options_from_properties(properties).items()))


# -- subscription -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subscription:
    """Which topic-partitions a query reads: exactly one of the three Kafka strategies."""

    kind: SubscriptionKind
    topics: tuple[str, ...] = ()  # subscribe
    pattern: str = ""  # subscribePattern (a full match, as Java's Pattern.matches)
    assigned: tuple[TopicPartition, ...] = ()  # assign

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` belongs to the subscription (internal ``__`` topics never match
        a pattern, as with Kafka's ``exclude.internal.topics``)."""
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "assign":
            return any(t == topic for t, _ in self.assigned)
        return not topic.startswith("__") and re.fullmatch(self.pattern, topic) is not None

    def describe(self) -> str:
        if self.kind == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.kind == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return "assign=" + json.dumps(_group(self.assigned))

    @staticmethod
    def parse(options: Mapping[str, str]) -> Subscription:
        given = {
            name: value
            for name in ("subscribe", "subscribePattern", "assign")
            if (value := get_option(options, name)) is not None
        }
        if len(given) != 1:
            problem = (
                "one of 'subscribe', 'subscribePattern' or 'assign' is required"
                if not given
                else "only one of 'subscribe', 'subscribePattern' and 'assign' may be given, got "
                + " and ".join(f"'{n}'" for n in given)
            )
            raise OdradekOptionError("/".join(given) or "subscribe", problem)
        ((name, raw),) = given.items()
        if name == "subscribe":
            topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
            if not topics:
                raise OdradekOptionError(name, f"no topic to subscribe to in {raw!r}")
            return Subscription("subscribe", topics=topics)
        if name == "subscribePattern":
            if not raw.strip():
                raise OdradekOptionError(name, "the pattern is empty")
            try:
                re.compile(raw.strip())
            except re.error as exc:
                raise OdradekOptionError(name, f"not a valid regular expression: {exc}") from None
            return Subscription("subscribePattern", pattern=raw.strip())
        assigned = parse_partitions_json(name, raw)
        if not assigned:
            raise OdradekOptionError(name, "no topic-partition assigned")
        return Subscription("assign", assigned=tuple(assigned))


def _group(tps: object) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for topic, partition in tps:  # type: ignore[attr-defined]
        grouped.setdefault(topic, []).append(partition)
    return grouped


# -- offsets ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends, before it is resolved against the broker.

    Exactly one form: ``default`` (EARLIEST or LATEST for every partition), ``offsets`` (per
    partition, -2/-1 allowed), ``timestamp`` (one for all partitions) or ``timestamps`` (per
    partition). ``option`` is the name reported in errors.
    """

    option: str
    default: int | None = None
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None
    timestamps: dict[TopicPartition, int] = field(default_factory=dict)

    @property
    def by_timestamp(self) -> bool:
        return self.timestamp is not None or bool(self.timestamps)

    def named_partitions(self) -> set[TopicPartition]:
        return set(self.offsets) | set(self.timestamps)


def _offset_spec(
    options: Mapping[str, str], which: Literal["starting", "ending"], default: int | None
) -> OffsetSpec | None:
    ts_name = f"{which}Timestamp"
    by_ts_name = f"{which}OffsetsByTimestamp"
    name = f"{which}Offsets"
    timestamp = parse_int(options, ts_name, minimum=0)
    if timestamp is not None:
        return OffsetSpec(ts_name, timestamp=timestamp)
    raw = get_option(options, by_ts_name)
    if raw is not None:
        return OffsetSpec(
            by_ts_name, timestamps=parse_offsets_json(by_ts_name, raw, timestamps=True)
        )
    raw = get_option(options, name)
    if raw is None:
        return None if default is None else OffsetSpec(name, default=default)
    text = raw.strip()
    if text.lower() == "earliest":
        return OffsetSpec(name, default=EARLIEST)
    if text.lower() == "latest":
        return OffsetSpec(name, default=LATEST)
    if not text.startswith("{"):
        raise OdradekOptionError(
            name,
            f"expected 'earliest', 'latest' or JSON like {{\"topic\":{{\"0\":23}}}}, got {raw!r}",
        )
    return OffsetSpec(name, offsets=parse_offsets_json(name, text))


# -- read and write options ---------------------------------------------------------------------


@dataclass(frozen=True)
class ReadOptions:
    """Everything a reader needs, validated; plain data, so it pickles to executors."""

    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None  # batch only
    starting_by_timestamp_strategy: Literal["error", "latest"] = "error"
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120_000
    fetch_max_bytes: int = 16 << 20  # per fetch request, per topic-partition
    client_options: tuple[tuple[str, Any], ...] = ()  # TLS, SASL (the kafka. properties)

    @staticmethod
    def parse(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
        subscription = Subscription.parse(options)
        starting = _offset_spec(options, "starting", LATEST if streaming else EARLIEST)
        assert starting is not None
        ending = _offset_spec(options, "ending", None if streaming else LATEST)
        if streaming and ending is not None:
            raise OdradekOptionError(ending.option, "is not valid in streaming queries")
        if not streaming:
            _check_batch_bounds(starting, ending)
        strategy = (
            (get_option(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
        )
        if strategy not in ("error", "latest"):
            raise OdradekOptionError(
                "startingOffsetsByTimestampStrategy", f"expected error or latest, got {strategy!r}"
            )
        max_per_trigger = parse_int(options, "maxOffsetsPerTrigger", minimum=1)
        if max_per_trigger is not None and not streaming:
            max_per_trigger = None  # Spark ignores it in batch queries
        return ReadOptions(
            bootstrap_servers=_bootstrap(options),
            subscription=subscription,
            starting=starting,
            ending=ending,
            starting_by_timestamp_strategy=strategy,  # type: ignore[arg-type]
            min_partitions=parse_int(options, "minPartitions", minimum=1),
            max_records_per_partition=parse_int(options, "maxRecordsPerPartition", minimum=1),
            max_offsets_per_trigger=max_per_trigger,
            include_headers=parse_bool(options, "includeHeaders", False),
            fail_on_data_loss=parse_bool(options, "failOnDataLoss", True),
            poll_timeout_ms=parse_int(options, "kafkaConsumer.pollTimeoutMs", minimum=1) or 120_000,
            fetch_max_bytes=int_value(
                "fetch.max.bytes",
                get_option(options, "fetch.max.bytes")
                or get_option(options, "kafka.fetch.max.bytes"),
                minimum=1024,
            )
            or 16 << 20,
            client_options=_client_options(options, _READER_PROPERTIES),
        )


def _check_batch_bounds(starting: OffsetSpec, ending: OffsetSpec | None) -> None:
    """Spark's rules: a batch query cannot start at latest nor end at earliest."""
    if starting.default == LATEST:
        raise OdradekOptionError(starting.option, "cannot be 'latest' for a batch query")
    for tp, offset in starting.offsets.items():
        if offset == LATEST:
            raise OdradekOptionError(
                starting.option, f"{tp[0]}-{tp[1]} cannot be latest (-1) for a batch query"
            )
    if ending is None:
        return
    if ending.default == EARLIEST:
        raise OdradekOptionError(ending.option, "cannot be 'earliest' for a batch query")
    for tp, offset in ending.offsets.items():
        if offset == EARLIEST:
            raise OdradekOptionError(
                ending.option, f"{tp[0]}-{tp[1]} cannot be earliest (-2) for a batch query"
            )


Acks = Literal[0, 1, -1]


@dataclass(frozen=True)
class WriteOptions:
    """Sink options: the default topic and the producer's settings (``kafka.`` prefix allowed)."""

    bootstrap_servers: str
    topic: str | None
    acks: int = -1
    linger_ms: int = 5
    batch_size: int = 1 << 20
    compression: str = "none"
    client_options: tuple[tuple[str, Any], ...] = ()  # TLS, SASL (the kafka. properties)

    @staticmethod
    def parse(options: Mapping[str, str]) -> WriteOptions:
        def producer(name: str) -> str | None:
            return get_option(options, name) or get_option(options, f"kafka.{name}")

        topic = get_option(options, "topic")
        if topic is not None and not topic.strip():
            raise OdradekOptionError("topic", "is empty")
        acks_raw = (producer("acks") or "all").strip().lower()
        acks_map = {"all": -1, "-1": -1, "1": 1, "0": 0}
        if acks_raw not in acks_map:
            raise OdradekOptionError("acks", f"expected 0, 1, all or -1, got {acks_raw!r}")
        compression = (producer("compression.type") or "none").strip().lower()
        if compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
            raise OdradekOptionError(
                "compression.type", f"expected none, gzip, snappy, lz4 or zstd, got {compression!r}"
            )
        linger = int_value("linger.ms", producer("linger.ms"), minimum=0)
        batch = int_value("batch.size", producer("batch.size"), minimum=1)
        return WriteOptions(
            bootstrap_servers=_bootstrap(options),
            topic=topic.strip() if topic else None,
            acks=acks_map[acks_raw],
            linger_ms=5 if linger is None else linger,
            batch_size=(1 << 20) if batch is None else batch,
            compression=compression,
            client_options=_client_options(options, _WRITER_PROPERTIES),
        )
