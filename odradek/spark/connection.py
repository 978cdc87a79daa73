"""The driver's :class:`~odradek.spark.metadata.Cluster` over the blocking client.

Two questions only, both answered without side effects on the broker: which topics exist
(a Metadata request for *all* topics, which never auto-creates one) and ListOffsets. Keys are
converted between the data source's plain ``(topic, partition)`` tuples and the client's
``TopicPartition``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.client import Client, TopicPartition
from odradek.spark.option_values import TopicPartition as TP

__all__ = ["ClientCluster"]


class ClientCluster:
    """:class:`~odradek.spark.metadata.Cluster` backed by one :class:`odradek.client.Client`."""

    def __init__(
        self, bootstrap_servers: str, client_options: Mapping[str, Any] | None = None
    ) -> None:
        """``client_options``: TLS and SASL (:mod:`odradek.client.security`)."""
        self._client = Client(bootstrap_servers, **(client_options or {}))

    def topics(self) -> dict[str, int]:
        found = self._client.metadata(topics=None).topics
        return {name: len(meta.partitions) for name, meta in found.items() if not meta.error_code}

    def list_offsets(self, query: Mapping[TP, int]) -> dict[TP, int | None]:
        if not query:
            return {}
        answers = self._client.list_offsets(
            {TopicPartition(topic, partition): ts for (topic, partition), ts in query.items()}
        )
        result: dict[TP, int | None] = {}
        for tp, answer in answers.items():
            offset = getattr(answer, "offset", None) if answer is not None else None
            result[(tp.topic, tp.partition)] = (
                offset if offset is not None and offset >= 0 else None
            )
        return result

    def close(self) -> None:
        self._client.close()
