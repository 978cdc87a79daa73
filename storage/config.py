"""Topic-level log configuration, under Kafka's topic config names.

Each :class:`ConfigKey` ties a Kafka topic-level name (``segment.bytes``) to the attribute of
:class:`LogConfig` that holds it (``segment_bytes``, units in the name), its parser, its lower
bound and the broker-level key that supplies its default (``log.segment.bytes``). A topic's
effective config is the broker defaults with the topic's overrides applied; an unknown key or a
value that does not parse is an :class:`~odradek.storage.errors.InvalidConfigError` naming both.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from odradek.storage.errors import InvalidConfigError

__all__ = ["CONFIG_KEYS", "ConfigKey", "LogConfig"]

LONG_MAX = 0x7FFF_FFFF_FFFF_FFFF
INT_MAX = 0x7FFF_FFFF

COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("delete", "compact")
_INTEGER = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Effective configuration of one partition's log (Kafka's defaults)."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1048588
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    file_delete_delay_ms: int = 60000
    message_timestamp_type: str = "CreateTime"
    compression_type: str = "producer"
    # Broker-level, not a topic config (no CONFIG_KEYS entry): how long an idle idempotent
    # producer's state is kept (producer.id.expiration.ms, storage.producer_state).
    producer_id_expiration_ms: int = 86_400_000

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def with_overrides(self, overrides: Mapping[str, str]) -> LogConfig:
        """This config with Kafka topic-level ``overrides`` applied (validated)."""
        changes = {}
        for name, raw in overrides.items():
            key = CONFIG_KEYS.get(name)
            if key is None:
                raise InvalidConfigError(f"unknown topic config {name!r}")
            changes[key.attribute] = key.parse(raw)
        return dataclasses.replace(self, **changes)

    def to_kafka(self) -> dict[str, str]:
        """Every topic-level setting under its Kafka name, as strings (DescribeConfigs)."""
        return {name: key.render(getattr(self, key.attribute)) for name, key in CONFIG_KEYS.items()}


def _parse_int(minimum: int, maximum: int) -> Callable[[str, str], int]:
    def parse(name: str, raw: str) -> int:
        text = str(raw).strip()
        if not _INTEGER.fullmatch(text):  # Java's parseLong: no "1_000", no non-ASCII digits
            raise InvalidConfigError(f"{name}={raw!r}: not an integer")
        value = int(text)
        if not minimum <= value <= maximum:
            raise InvalidConfigError(f"{name}={value}: must be in [{minimum}, {maximum}]")
        return value

    return parse


def _parse_ratio(name: str, raw: str) -> float:
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise InvalidConfigError(f"{name}={raw!r}: not a number") from None
    if not 0.0 <= value <= 1.0:
        raise InvalidConfigError(f"{name}={value}: must be in [0, 1]")
    return value


def _parse_choice(choices: tuple[str, ...]) -> Callable[[str, str], str]:
    def parse(name: str, raw: str) -> str:
        value = str(raw).strip()
        if value not in choices:
            raise InvalidConfigError(f"{name}={raw!r}: must be one of {', '.join(choices)}")
        return value

    return parse


def _parse_policy(name: str, raw: str) -> tuple[str, ...]:
    parts = tuple(sorted({p.strip() for p in str(raw).split(",") if p.strip()}))
    if not parts or any(p not in CLEANUP_POLICIES for p in parts):
        raise InvalidConfigError(f"{name}={raw!r}: must be delete, compact or compact,delete")
    return parts


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    attribute: str
    parser: Callable[[str, str], object]
    broker_keys: tuple[str, ...] = ()  # server.properties keys that set the default

    def parse(self, raw: str) -> object:
        return self.parser(self.name, raw)

    @staticmethod
    def render(value: object) -> str:
        if isinstance(value, tuple):
            return ",".join(value)
        return str(value)


def _key(name: str, parser: Callable[[str, str], object], *broker_keys: str) -> ConfigKey:
    return ConfigKey(name, name.replace(".", "_"), parser, broker_keys)


_MS = _parse_int(0, LONG_MAX)
_MS_OR_UNLIMITED = _parse_int(-1, LONG_MAX)

CONFIG_KEYS: dict[str, ConfigKey] = {
    key.name: key
    for key in (
        _key("segment.bytes", _parse_int(14, INT_MAX), "log.segment.bytes"),
        # log.roll.hours is converted to ms by the broker config before it gets here.
        _key("segment.ms", _parse_int(1, LONG_MAX), "log.roll.ms"),
        # Kafka's floor is 4; ours is one time index entry (12 bytes), the least an index
        # file can be preallocated to (storage.index).
        _key("segment.index.bytes", _parse_int(12, INT_MAX), "log.index.size.max.bytes"),
        _key("index.interval.bytes", _parse_int(0, INT_MAX), "log.index.interval.bytes"),
        _key("max.message.bytes", _parse_int(0, INT_MAX), "message.max.bytes"),
        _key("flush.messages", _parse_int(1, LONG_MAX), "log.flush.interval.messages"),
        _key("flush.ms", _MS, "log.flush.interval.ms"),
        _key("retention.ms", _MS_OR_UNLIMITED, "log.retention.ms"),
        _key("retention.bytes", _parse_int(-1, LONG_MAX), "log.retention.bytes"),
        _key("cleanup.policy", _parse_policy, "log.cleanup.policy"),
        _key("delete.retention.ms", _MS, "log.cleaner.delete.retention.ms"),
        _key("min.compaction.lag.ms", _MS, "log.cleaner.min.compaction.lag.ms"),
        _key("max.compaction.lag.ms", _parse_int(1, LONG_MAX), "log.cleaner.max.compaction.lag.ms"),
        _key("min.cleanable.dirty.ratio", _parse_ratio, "log.cleaner.min.cleanable.ratio"),
        _key("file.delete.delay.ms", _MS, "log.segment.delete.delay.ms"),
        _key(
            "message.timestamp.type",
            _parse_choice(TIMESTAMP_TYPES),
            "log.message.timestamp.type",
        ),
        _key("compression.type", _parse_choice(COMPRESSION_TYPES), "compression.type"),
    )
}
