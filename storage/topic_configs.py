"""``topic-configs.json``: every topic's id and config overrides (odradek's own file).

Kafka keeps topic ids and configs in its metadata log (KRaft); odradek has no controller, so
they live in this file, one copy in each online root of ``log.dirs``::

    {"version": 7,
     "topics": {"page-views": {"topic_id": "<Kafka Uuid text>", "configs": {"retention.ms": "..."}},
                ...}}

``version`` counts the writes. Every change rewrites the whole table to every online root
(:func:`encode_topic_configs`, then the manager's atomic write per root); at start-up the copy
with the highest version wins (:func:`read_topic_configs`), so losing a root, or a crash between
two roots' writes, loses no config: an older copy simply loses to a newer one. A copy that does
not parse is logged and ignored.

Crash safety: each copy is replaced atomically (:func:`odradek.storage.atomic.write_atomically`),
so a reader sees a whole old or a whole new table.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

from odradek.storage.errors import StorageError
from odradek.storage.topics import validate_topic_name

__all__ = ["TOPIC_CONFIGS", "TopicMetadata", "encode_topic_configs", "read_topic_configs"]

logger = logging.getLogger(__name__)

TOPIC_CONFIGS = "topic-configs.json"


class TopicMetadata:
    """A topic's id and config overrides (Kafka topic-level names)."""

    __slots__ = ("configs", "topic_id")

    def __init__(self, topic_id: str, configs: Mapping[str, str] | None = None) -> None:
        self.topic_id = topic_id
        self.configs = dict(configs or {})


def read_topic_configs(roots: Iterable[Path]) -> tuple[int, dict[str, TopicMetadata]]:
    """The newest table found in ``roots``: (its version, topic name -> metadata); (0, {})
    if no root holds a readable one."""
    best_version, best_topics = 0, {}
    for root in roots:
        path = root / TOPIC_CONFIGS
        try:
            data = json.loads(path.read_bytes())
            version = int(data["version"])
            topics = {
                validate_topic_name(name): TopicMetadata(
                    str(entry["topic_id"]),
                    {str(k): str(v) for k, v in entry["configs"].items()},
                )
                for name, entry in data["topics"].items()
            }
        except FileNotFoundError:
            continue
        except (ValueError, KeyError, TypeError, AttributeError, StorageError) as exc:
            logger.error("ignoring unreadable %s: %s", path, exc)
            continue
        if version > best_version:
            best_version, best_topics = version, topics
    return best_version, best_topics


def encode_topic_configs(version: int, topics: Mapping[str, TopicMetadata]) -> bytes:
    """The file's bytes for ``topics`` at ``version`` (sorted: equal tables, equal bytes)."""
    data = {
        "version": version,
        "topics": {
            name: {"topic_id": meta.topic_id, "configs": meta.configs}
            for name, meta in sorted(topics.items())
        },
    }
    return json.dumps(data, indent=1, sort_keys=True).encode()
