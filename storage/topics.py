"""Topic names and partition directory names.

Kafka's rules (``org.apache.kafka.common.internals.Topic``): a topic name is 1 to 249 characters
of ``[a-zA-Z0-9._-]`` and is neither ``.`` nor ``..``. The limit of 249 leaves room for
``-<partition>`` within a 255-byte file name. A name is validated before it is ever used to
build a path, so no name can escape a log dir.

A partition lives in ``<log.dir>/<topic>-<partition>``; the partition number is what follows the
last ``-`` (topic names may contain ``-`` themselves). A topic being deleted is first renamed to
``<topic>-<partition>.<uuid>-delete`` (:func:`delete_dir_name`), the topic part cut short so
that the name still fits 255 bytes, as Kafka does.

Two names that differ only by ``.`` against ``_`` (``a.b`` and ``a_b``) collide: Kafka's metric
names replace ``.`` by ``_``, so it refuses to create the second (:func:`collision_key`).
Internal topics (:data:`INTERNAL_TOPICS`, Kafka's ``Topic.isInternal``) hold broker state:
clients may read them but not write, delete or reconfigure them unsafely.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from odradek.storage.errors import InvalidTopicError, TopicExistsError

__all__ = [
    "DELETE_DIR_SUFFIX",
    "INTERNAL_TOPICS",
    "MAX_TOPIC_NAME_LENGTH",
    "OFFSETS_TOPIC",
    "collision_key",
    "delete_dir_name",
    "is_internal",
    "parse_partition_dir",
    "partition_dir_name",
    "validate_new_topic_name",
    "validate_topic_name",
]

MAX_TOPIC_NAME_LENGTH = 249
MAX_FILE_NAME_BYTES = 255
DELETE_DIR_SUFFIX = "-delete"
OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state"})
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
_PARTITION_DIR = re.compile(r"([a-zA-Z0-9._-]+)-(0|[1-9][0-9]{0,9})")


def validate_topic_name(name: object) -> str:
    """Return ``name`` if Kafka accepts it as a topic name, else raise InvalidTopicError."""
    if not isinstance(name, str) or not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} "
            f"characters, topic name: {name[:40]!r}..."
        )
    if not _LEGAL.fullmatch(name):
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return name


def is_internal(topic: str) -> bool:
    """Kafka's ``Topic.isInternal``: the topic holds broker state (group offsets, ...)."""
    return topic in INTERNAL_TOPICS


def collision_key(topic: str) -> str:
    """Kafka's ``Topic.unifyCollisionChars``: two topics with the same key may not coexist."""
    return topic.replace(".", "_")


def validate_new_topic_name(topic: str, existing: Collection[str]) -> str:
    """Return ``topic`` if a topic of that name may be created beside ``existing`` ones: a
    legal name, not taken (:class:`TopicExistsError`), colliding with none of them nor with an
    internal topic's name (:class:`InvalidTopicError`)."""
    validate_topic_name(topic)
    if topic in existing:
        raise TopicExistsError(f"Topic '{topic}' already exists.")
    key = collision_key(topic)
    # Kafka: '.' and '_' collide in metric names. An internal topic's name is reserved even
    # before it exists: '__consumer.offsets' must not keep the coordinator from creating it.
    for other in (*existing, *INTERNAL_TOPICS):
        if other != topic and collision_key(other) == key:
            raise InvalidTopicError(f"Topic '{topic}' collides with existing topic: {other}")
    return topic


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{validate_topic_name(topic)}-{partition}"


def delete_dir_name(topic: str, partition: int, unique_id: str) -> str:
    """``<topic>-<partition>.<unique_id>-delete``, the topic cut so the name fits 255 bytes."""
    suffix = f"-{partition}.{unique_id}{DELETE_DIR_SUFFIX}"
    return validate_topic_name(topic)[: MAX_FILE_NAME_BYTES - len(suffix)] + suffix


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``(topic, partition)`` for a live partition directory name, or None for anything else."""
    match = _PARTITION_DIR.fullmatch(name)
    if match is None:
        return None
    topic, partition = match.group(1), int(match.group(2))
    try:
        validate_topic_name(topic)
    except InvalidTopicError:
        return None
    if partition > 0x7FFF_FFFF:
        return None
    return topic, partition
