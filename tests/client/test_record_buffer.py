"""The producer's record buffer and tail append: the C twin (``odradek.client._record_buffer``)
against the pure-Python one (:mod:`odradek.client.record_buffer`) and against the reference encoder
in :mod:`odradek.protocol.records`. ``make test`` also runs the client suite with
``NO_ODRADEK_EXTENSIONS=1`` (the pure classes behind the real producer)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.client.accumulator import Batch, encode_batch
from odradek.client.futures import RecordFuture
from odradek.client.record_buffer import PyRecordBuffer, PyTailAppender, record_size
from odradek.client.types import TopicPartition
from odradek.protocol import native
from odradek.protocol.batch_builder import encode_batch as reference_encode
from odradek.protocol.record_batch import Compression, validate_batch
from odradek.protocol.records import decode_records

compiled = native.load("odradek.client._record_buffer")
BUFFERS: list[Any] = [PyRecordBuffer] + ([compiled.RecordBuffer] if compiled else [])
APPENDERS: list[tuple[Any, Any]] = [(PyTailAppender, PyRecordBuffer)]
if compiled:
    APPENDERS.append((compiled.TailAppender, compiled.RecordBuffer))
NOW_MS = 1_700_000_000_000

Headers = list[tuple[str, bytes | None]]
Row = tuple[bytes | None, bytes | None, int, Headers]


def test_the_compiled_buffer_is_built_here() -> None:
    """gcc is on every machine this project builds on: a missing module is a broken build,
    not a reason to run silently on the pure-Python path."""
    if os.environ.get("NO_ODRADEK_EXTENSIONS"):
        pytest.skip("NO_ODRADEK_EXTENSIONS is set: the pure-Python path is under test")
    assert compiled is not None, "odradek.client._record_buffer was not built (pip install -e .)"


fields = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=150, max_size=20_000))
headers = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))), max_size=3
)
rows = st.lists(
    st.tuples(
        fields,
        fields,
        # timestamp deltas of every width, negative ones included (the wall clock may step back)
        st.integers(-(10**12), 10**12).map(lambda d: NOW_MS + d) | st.just(NOW_MS),
        headers,
    ),
    min_size=1,
    max_size=60,
)


def _filled(cls: Any, records: list[Row]) -> Any:
    buffer = cls()
    for i, (key, value, ts, hdrs) in enumerate(records):
        assert buffer.append(value, key, ts, hdrs or None) == i
    return buffer


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows)
def test_every_buffer_encodes_what_the_reference_encoder_does(records: list[Row]) -> None:
    expected = reference_encode(records)
    for cls in BUFFERS:
        batch = Batch(TopicPartition("t", 0), 0.0, 1.0)
        batch.records = _filled(cls, records)
        assert b"".join(encode_batch(batch)) == expected, cls
        buffer = batch.records
        assert len(buffer) == len(records)
        assert buffer.size_bytes == sum(record_size(k, v, h) for k, v, _, h in records)
        assert buffer.first_timestamp_ms == records[0][2]
        assert buffer.max_timestamp_ms == max(ts for _, _, ts, _ in records)
        for i, (key, value, timestamp_ms, _) in enumerate(records):
            meta = (
                timestamp_ms,
                len(key) if key is not None else -1,
                len(value or b"") - (value is None),
            )
            assert buffer.metadata(i) == meta
        assert buffer.size_bytes >= len(buffer.body())  # the estimate never undershoots


@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("cls", BUFFERS)
def test_compressed_batches_decode_back(cls: Any, codec: Compression) -> None:
    records: list[Row] = [(None, b"x" * 100, NOW_MS + i // 10, []) for i in range(500)]
    records[7] = (b"key", None, NOW_MS, [("h", b"v"), ("é", None)])
    batch = Batch(TopicPartition("t", 0), 0.0, 1.0)
    batch.records = _filled(cls, records)
    data = b"".join(encode_batch(batch, codec))
    validate_batch(data)
    got = [(r.key, r.value, r.timestamp_ms, list(r.headers)) for r in decode_records(data)]
    assert got == [(k, v, ts, h) for k, v, ts, h in records]


@pytest.mark.parametrize("cls", BUFFERS)
def test_bad_fields_are_refused_and_leave_the_buffer_as_it_was(cls: Any) -> None:
    buffer = _filled(cls, [(None, b"v", NOW_MS, [])])
    before = (len(buffer), buffer.size_bytes, buffer.body())
    for value, key, hdrs in [
        ("text", None, None),
        (b"v", bytearray(b"k"), None),
        (b"v", None, [("h", "not bytes")]),
        (b"v", None, [(b"not str", b"v")]),
        (b"v", None, [("only one",)]),
    ]:
        with pytest.raises(TypeError):
            buffer.append(value, key, NOW_MS, hdrs)
        assert (len(buffer), buffer.size_bytes, buffer.body()) == before
    with pytest.raises(IndexError):
        buffer.metadata(1)


@pytest.mark.parametrize("cls", BUFFERS)
def test_an_empty_buffer(cls: Any) -> None:
    buffer = cls()
    assert (len(buffer), buffer.size_bytes, buffer.body()) == (0, 0, b"")
    assert buffer.first_timestamp_ms == buffer.max_timestamp_ms == -1


@pytest.mark.skipif(compiled is None, reason="the C buffer is not built")
def test_the_c_body_is_a_view_and_refuses_appends_while_it_lives() -> None:
    """The C buffer hands its bytes out without a copy (and the encoder sends them so); a
    realloc would move them under the view, so appends wait until every view is released,
    as a bytearray's resizes do."""
    rows = [(None, b"v" * 100, NOW_MS, []), (b"k", b"w", NOW_MS + 1, [])]
    buffer = compiled.RecordBuffer()
    buffer.append(b"v" * 100, None, NOW_MS, None)
    body = buffer.body()
    assert isinstance(body, memoryview) and body.readonly
    assert body == reference_encode(rows[:1])[61:]
    with pytest.raises(BufferError):
        buffer.append(b"w", b"k", NOW_MS + 1, None)
    assert len(buffer) == 1
    body.release()
    assert buffer.append(b"w", b"k", NOW_MS + 1, None) == 1
    batch = Batch(TopicPartition("t", 0), 0.0, 1.0)
    batch.records = buffer
    header, records = encode_batch(batch)
    assert records.obj is buffer  # type: ignore[union-attr]
    assert header + records == reference_encode(rows)


def _tail(buffer_cls: Any) -> tuple[dict[str, Batch], Batch]:
    batch = Batch(TopicPartition("t", 3), 0.0, 1.0)
    batch.records = buffer_cls()
    return {"t": batch}, batch


@pytest.mark.parametrize(("appender_cls", "buffer_cls"), APPENDERS)
def test_the_tail_append_returns_a_future_of_its_record(appender_cls: Any, buffer_cls: Any) -> None:
    tails, batch = _tail(buffer_cls)
    append = appender_cls(tails, 10_000, RecordFuture).append
    futures = [append("t", b"%d" % i) for i in range(20)]
    assert tails == {"t": batch}  # put back
    assert [f._index for f in futures] == list(range(20))
    assert all(type(f) is RecordFuture and f._batch is batch for f in futures)
    assert not futures[0].done()
    batch.complete(base_offset=100)
    metadata = futures[5].result(timeout=0)
    assert (metadata.topic, metadata.partition, metadata.offset) == ("t", 3, 105)
    assert (metadata.serialized_key_size, metadata.serialized_value_size) == (-1, 1)
    records = list(decode_records(b"".join(encode_batch(batch))))
    assert [r.value for r in records] == [b"%d" % i for i in range(20)]
    assert all(r.key is None and not r.headers for r in records)


@pytest.mark.parametrize(("appender_cls", "buffer_cls"), APPENDERS)
def test_the_tail_append_declines_what_the_locked_path_must_do(
    appender_cls: Any, buffer_cls: Any
) -> None:
    tails, batch = _tail(buffer_cls)
    appender = appender_cls(tails, 36 + 100 + 36 + 50, RecordFuture)
    assert appender.append("other", b"v") is None  # no tail for that topic
    assert appender.append("t", "not bytes") is None
    assert appender.append("t", bytearray(b"v")) is None
    assert appender.append("t", b"x" * 100) is not None
    assert appender.append("t", b"x" * 51) is None  # would pass limit_bytes
    assert appender.append("t", b"x" * 50) is not None  # exactly at the limit
    assert appender.append("t", b"") is None  # full
    assert len(batch.records) == 2 and tails == {"t": batch}
    del tails["t"]  # another thread owns the tail
    assert appender.append("t", b"v") is None
    tails["t"] = batch
    appender.closed = True
    assert appender.append("t", b"v") is None
    assert len(batch.records) == 2


def test_the_compiled_appender_needs_slots_for_its_futures() -> None:
    if compiled is None:
        pytest.skip("odradek.client._record_buffer not built")

    class NoSlots:
        pass

    with pytest.raises(TypeError, match="__slots__"):
        compiled.TailAppender({}, 100, NoSlots)


def _tails_consistent(acc: Any) -> bool:
    """Every published tail is its topic's live tail and its partition's open batch."""
    return all(
        batch.is_tail and acc.tail_of.get(topic) is batch and acc.open.get(batch.tp) is batch
        for topic, batch in acc.tails.items()
    )


@pytest.mark.parametrize("tail_next", [True, False])
def test_a_record_that_closes_a_full_tail_never_publishes_a_plain_batch(tail_next: bool) -> None:
    # a keyed record (or one with headers) arriving when the tail is full closes it; the new
    # batch it opens must not be published as the tail without being one, or lock-free
    # appends would go on into it after it closes (records sent twice, offsets shifted)
    from odradek.client.accumulator import Accumulator
    from odradek.protocol.record_batch import Compression

    acc = Accumulator(
        batch_size=36 * 4 + 400,
        linger_s=60.0,
        delivery_timeout_s=60.0,
        compression=Compression.NONE,
        on_batch_closed=lambda tp: None,
    )
    first = None
    for _ in range(4):  # four 100-byte null-key records fill the tail
        added = acc.add("t", 0, None, bytes(100), 0, None, 136, 0.0, True)
        assert added is not None and _tails_consistent(acc)
        first = first or added[0]
    assert acc.tails["t"] is first
    key, headers = (b"k", None) if tail_next else (None, [("h", b"1")])
    added = acc.add("t", 0, key, bytes(100), 0, headers, 136 + 14, 0.0, False)
    assert added is not None and added[2]  # a fresh batch: the tail was full
    assert list(acc.ready) == [first] and _tails_consistent(acc)
    assert "t" not in acc.tails  # no tail until a null-key record makes the open batch one
    again = acc.add("t", 0, None, bytes(100), 0, None, 136, 0.0, True)
    assert again is not None and again[0] is added[0] and acc.tails["t"] is added[0]
    assert _tails_consistent(acc)
