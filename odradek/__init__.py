"""odradek: a single-node, Kafka-style log broker that stores topics in Apache Kafka's
on-disk format, with its Python client, command line and Spark data source.

The client's public API is importable from here::

    from odradek import Admin, Consumer, NewTopic, Producer, TopicPartition

Every name of :mod:`odradek.client` (its ``__all__``: the blocking and async faces, the
value types, one exception class per Kafka error code) is re-exported, imported on first use:
``import odradek.broker`` or ``import odradek.storage`` loads no client code.

One import namespace (DESIGN §1): ``odradek.protocol``, ``odradek.storage``,
``odradek.broker`` (the folders at the repository root, mapped by ``package-dir``),
``odradek.client``, ``odradek.cli``, ``odradek.spark`` and ``odradek.pipelines``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from odradek.client import (
        Admin,
        AsyncAdmin,
        AsyncClient,
        AsyncConsumer,
        AsyncProducer,
        Client,
        Consumer,
        ConsumerRecord,
        KafkaError,
        NewTopic,
        OffsetAndMetadata,
        Producer,
        RecordMetadata,
        TopicPartition,
    )

# The names most programs need; every other name of odradek.client.__all__ works too.
__all__ = [
    "Admin",
    "AsyncAdmin",
    "AsyncClient",
    "AsyncConsumer",
    "AsyncProducer",
    "Client",
    "Consumer",
    "ConsumerRecord",
    "KafkaError",
    "NewTopic",
    "OffsetAndMetadata",
    "Producer",
    "RecordMetadata",
    "TopicPartition",
    "__version__",
]


def __getattr__(name: str) -> Any:
    """The client's public names, imported from :mod:`odradek.client` on first use."""
    if not name.startswith("_"):
        # not `from odradek import client`: that asks this very function for "client" first
        client = importlib.import_module("odradek.client")
        if name in client.__all__:
            return getattr(client, name)
    raise AttributeError(f"module 'odradek' has no attribute {name!r}")


def __dir__() -> list[str]:
    client = importlib.import_module("odradek.client")
    return sorted({*globals(), *client.__all__})
