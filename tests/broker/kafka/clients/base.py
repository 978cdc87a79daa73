"""The face shared by the three client adapters (see the package docstring)."""

from __future__ import annotations

import time
from typing import NamedTuple

__all__ = ["ClientError", "Headers", "KafkaClient", "Rec", "until"]

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
    deletes_groups = True  # the client has DeleteGroups (aiokafka has not)

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

    # groups
    def list_groups(self) -> dict[str, str]:
        """``{group: state}`` (``Empty``, ``Stable``, ...) of every group the broker knows."""
        raise NotImplementedError

    def describe_group(self, group: str) -> tuple[str, int]:
        """(state, member count) of one group."""
        raise NotImplementedError

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets, ``{(topic, partition): offset}``."""
        raise NotImplementedError

    def delete_groups(self, groups: list[str]) -> dict[str, int]:
        """Delete ``groups``; the Kafka error code per group (0 when deleted)."""
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


def until(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())
