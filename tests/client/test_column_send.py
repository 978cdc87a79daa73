"""``RecordBuffer.extend`` (C and pure-Python twins) and ``Producer.send_columns``: records
encoded straight from Arrow-layout columns, against appending them one by one and, through a
real broker, against what a consumer reads back."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.client import Admin, NewTopic, Producer, TopicPartition
from odradek.client.record_buffer import PyRecordBuffer, record_size
from tests.client.test_record_buffer import BUFFERS
from tests.client.test_roundtrip import consume_all

NOW_MS = 1_700_000_000_000
cells = st.one_of(st.none(), st.binary(max_size=30), st.binary(min_size=200, max_size=2000))


def column(array: pa.Array) -> tuple[Any, Any, Any, int] | None:
    validity, offsets, data = array.buffers()
    return (offsets, b"" if data is None else data, validity, array.offset)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(cells, cells), min_size=1, max_size=40),
    st.integers(min_value=0, max_value=5),
    st.integers(min_value=40, max_value=6000),
    st.booleans(),
)
def test_extend_appends_what_append_would(
    rows: list[tuple[bytes | None, bytes | None]], skip: int, limit: int, as_string: bool
) -> None:
    keys = pa.array([k for k, _ in rows], type=pa.binary()).slice(0)
    values = pa.array([v for _, v in rows], type=pa.binary())
    if as_string:  # the sink also sends string columns: same buffers
        keys = pa.array([None if k is None else k.hex() for k, _ in rows], type=pa.string())
    order = np.arange(len(rows), dtype=np.int64)[::-1].copy()  # any row order
    start = min(skip, len(rows))
    expected = PyRecordBuffer()
    stop = start
    for row in order[start:].tolist():
        key = keys[row].as_py()
        key = key.encode() if isinstance(key, str) else key
        value = values[row].as_py()
        if len(expected) and expected.size_bytes + record_size(key, value, None) > limit:
            break
        expected.append(value, key, NOW_MS, None)
        stop += 1
    for cls in BUFFERS:
        buffer = cls()
        assert buffer.extend(column(values), column(keys), order, start, NOW_MS, limit) == stop
        assert (len(buffer), buffer.size_bytes) == (len(expected), expected.size_bytes)
        assert buffer.body() == expected.body()


@pytest.mark.parametrize("cls", BUFFERS)
def test_extend_refuses_rows_outside_the_column(cls: Any) -> None:
    values = pa.array([b"a", b"b"])
    with pytest.raises(ValueError, match="outside"):
        cls().extend(column(values), None, np.array([0, 2], dtype=np.int64), 0, NOW_MS, 1 << 20)


def test_send_columns_round_trips_through_the_broker(bootstrap: str, topic: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 2, 1, {})])
    values = pa.array([f"v{i}".encode() * 50 if i % 7 else None for i in range(3000)])
    keys = pa.array([f"k{i}".encode() if i % 2 else None for i in range(3000)])
    even = np.arange(0, 3000, 2, dtype=np.int64)
    odd = np.arange(1, 3000, 2, dtype=np.int64)
    with Producer(bootstrap, acks="all", batch_size=16_384) as producer:
        futures = producer.send_columns(topic, 1, column(values), column(keys), odd)
        futures += producer.send_columns(topic, None, column(values), None, even)
        producer.flush()
        assert len(futures) > 2  # several producer batches
        assert all(f.exception() is None for f in futures)
        with pytest.raises(Exception, match="partitions"):
            producer.send_columns(topic, 5, column(values), None, even)
    records = consume_all(bootstrap, [TopicPartition(topic, 0), TopicPartition(topic, 1)], 3000)
    by_partition = {p: [r for r in records if r.partition == p] for p in (0, 1)}
    got_odd = [r for r in by_partition[1] if r.key is not None]
    assert [(r.key, r.value) for r in got_odd] == [
        (keys[i].as_py(), values[i].as_py()) for i in odd.tolist()
    ]
    got_even = sorted((r for r in records if r.key is None), key=lambda r: r.value or b"")
    assert len(got_even) == len(even)
    assert sorted((r.value or b"") for r in got_even) == sorted(
        (values[i].as_py() or b"") for i in even.tolist()
    )
