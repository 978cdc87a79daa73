"""The values of the data source's options, as Spark's Kafka source spells them: the error that
names the option it is about, reading an option by name (Spark lower-cases the keys it passes),
booleans and integers, and the JSON objects of ``assign`` (topic-partitions) and of
``startingOffsets`` / ``endingOffsets`` / ``...ByTimestamp`` (an offset or a timestamp per
partition). Offsets follow Kafka's conventions: ``-2`` (:data:`EARLIEST`) is the log start
offset, ``-1`` (:data:`LATEST`) the log end offset. :mod:`odradek.spark.options` builds the
source's and the sink's options from these.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

__all__ = [
    "EARLIEST",
    "LATEST",
    "OdradekOptionError",
    "TopicPartition",
    "get_option",
    "int_value",
    "parse_bool",
    "parse_int",
    "parse_offsets_json",
    "parse_partitions_json",
]

EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]


class OdradekOptionError(ValueError):
    """An invalid data source option; the message names the option."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"option '{option}': {problem}")
        self.option = option


def get_option(options: Mapping[str, str], name: str) -> str | None:
    """The value of ``name`` (looked up case-insensitively; Spark lower-cases keys)."""
    lowered = name.lower()
    for key, value in options.items():
        if key.lower() == lowered:
            return None if value is None else str(value)
    return None


def parse_bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = get_option(options, name)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise OdradekOptionError(name, f"expected true or false, got {raw!r}")
    return lowered == "true"


def parse_int(options: Mapping[str, str], name: str, *, minimum: int | None = None) -> int | None:
    return int_value(name, get_option(options, name), minimum=minimum)


def int_value(name: str, raw: str | None, *, minimum: int | None = None) -> int | None:
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise OdradekOptionError(name, f"expected an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise OdradekOptionError(name, f"must be {what}, got {value}")
    return value


def _load_json_object(option: str, raw: str, example: str) -> dict[str, object]:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise OdradekOptionError(
            option, f"expected JSON like {example}, got {raw!r} ({exc})"
        ) from None
    if not isinstance(data, dict):
        raise OdradekOptionError(option, f"expected a JSON object like {example}, got {raw!r}")
    return data


def parse_partitions_json(option: str, raw: str) -> list[TopicPartition]:
    """``{"topicA": [0, 1], "topicB": [2]}`` (the ``assign`` option) → topic-partitions."""
    example = '{"topicA":[0,1],"topicB":[2]}'
    data = _load_json_object(option, raw, example)
    result: list[TopicPartition] = []
    for topic, partitions in data.items():
        if not isinstance(partitions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions
        ):
            raise OdradekOptionError(
                option, f"topic {topic!r}: expected a list of partition numbers like {example}"
            )
        result.extend((topic, p) for p in dict.fromkeys(partitions))
    return result


def parse_offsets_json(
    option: str, raw: str, *, timestamps: bool = False
) -> dict[TopicPartition, int]:
    """``{"t": {"0": 23, "1": -2}}`` → ``{("t", 0): 23, ("t", 1): -2}``.

    Offsets must be >= -2 (-2 earliest, -1 latest); timestamps (``timestamps=True``) >= 0.
    """
    example = '{"topic":{"0":1700000000000}}' if timestamps else '{"topic":{"0":23,"1":-2}}'
    data = _load_json_object(option, raw, example)
    result: dict[TopicPartition, int] = {}
    for topic, partitions in data.items():
        if not isinstance(partitions, dict):
            raise OdradekOptionError(
                option, f"topic {topic!r}: expected an object of partition to offset like {example}"
            )
        for key, value in partitions.items():
            try:
                partition = int(key)
            except ValueError:
                partition = -1
            if partition < 0:
                raise OdradekOptionError(option, f"topic {topic!r}: bad partition number {key!r}")
            low = 0 if timestamps else EARLIEST
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                what = (
                    "a timestamp in ms" if timestamps else "an offset, -2 (earliest) or -1 (latest)"
                )
                raise OdradekOptionError(
                    option, f"{topic}-{partition}: expected {what}, got {value!r}"
                )
            result[(topic, partition)] = value
    return result
