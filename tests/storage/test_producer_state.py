"""The idempotent producer's rules on the leader, through ``Log.append`` on real files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from odradek.broker.errors import error_code_for
from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.errors import ErrorCode
from odradek.storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
)
from odradek.storage.log import Log
from odradek.storage.producer_state import (
    EXPIRATION_CHECK_INTERVAL_MS,
    INT32_MAX,
    decrement_sequence,
    increment_sequence,
)
from tests.storage.conftest import config, open_log

PID = 4000


def pbatch(
    seq: int,
    count: int = 1,
    *,
    pid: int = PID,
    epoch: int = 0,
    ts: int = 1_000,
    transactional: bool = False,
) -> bytes:
    """A batch of ``count`` records from producer ``pid`` starting at sequence ``seq``."""
    return encode_batch(
        [(b"k", f"s{seq}-{i}".encode(), ts) for i in range(count)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=transactional,
    )


def offsets(log: Log, data: bytes) -> tuple[int, int, bool]:
    info = log.append(data, now_ms=0)
    return info.first_offset, info.last_offset, info.duplicate


@pytest.fixture
def log(log_dir: Path) -> Log:
    return open_log(log_dir)


def test_in_sequence_batches_are_appended(log: Log) -> None:
    assert offsets(log, pbatch(0, 3)) == (0, 2, False)
    assert offsets(log, pbatch(3, 2)) == (3, 4, False)
    entry = log.producer_state.last_entry(PID)
    assert entry is not None and entry.last_seq == 4 and entry.producer_epoch == 0


@pytest.mark.parametrize("back", [1, 2, 3, 4, 5])
def test_a_duplicate_of_each_of_the_last_five_batches_writes_nothing(log: Log, back: int) -> None:
    sent = [pbatch(i * 2, 2) for i in range(6)]  # sequences 0-1, 2-3, ..., 10-11
    appended = [offsets(log, data) for data in sent]
    end = log.next_offset
    retry = sent[-back]
    first, last, duplicate = offsets(log, retry)
    assert duplicate and (first, last) == appended[-back][:2]
    assert log.next_offset == end and log.active_segment.size_bytes == sum(map(len, sent))


def test_a_retry_of_the_sixth_last_batch_is_out_of_order(log: Log) -> None:
    sent = [pbatch(i, 1) for i in range(6)]
    for data in sent:
        log.append(data, now_ms=0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(sent[0], now_ms=0)


def test_duplicate_info_under_log_append_time(log_dir: Path) -> None:
    log = open_log(log_dir, config(message_timestamp_type="LogAppendTime"))
    first = log.append(pbatch(0, 2), now_ms=777)
    again = log.append(pbatch(0, 2), now_ms=999)
    assert again.duplicate and again.log_append_time_ms == 777 == first.log_append_time_ms
    assert (again.first_offset, again.last_offset, again.record_count) == (0, 1, 2)


def test_a_gap_is_out_of_order_and_writes_nothing(log: Log) -> None:
    log.append(pbatch(0, 2), now_ms=0)
    for bad in (3, 1, 0x7FFF):
        with pytest.raises(OutOfOrderSequenceError):
            log.append(pbatch(bad), now_ms=0)
    assert log.next_offset == 2
    assert offsets(log, pbatch(2)) == (2, 2, False)


def test_a_stale_epoch_is_refused(log: Log) -> None:
    log.append(pbatch(0, epoch=3), now_ms=0)
    with pytest.raises(InvalidProducerEpochError) as raised:
        log.append(pbatch(1, epoch=2), now_ms=0)
    assert error_code_for(raised.value) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.next_offset == 1


def test_a_new_epoch_must_start_at_sequence_zero(log: Log) -> None:
    log.append(pbatch(0, 5), now_ms=0)
    with pytest.raises(OutOfOrderSequenceError) as raised:
        log.append(pbatch(5, epoch=1), now_ms=0)
    assert error_code_for(raised.value) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert offsets(log, pbatch(0, epoch=1)) == (5, 5, False)
    # the old epoch's batches are forgotten: its retry is now a stale epoch
    with pytest.raises(InvalidProducerEpochError):
        log.append(pbatch(0, 5), now_ms=0)
    assert offsets(log, pbatch(1, epoch=1)) == (6, 6, False)


def test_an_unknown_producer_may_start_at_any_sequence(log: Log) -> None:
    # Current Kafka: no state for the producer (new, expired, or lost) -> any sequence.
    assert offsets(log, pbatch(41, 2, pid=7)) == (0, 1, False)
    assert offsets(log, pbatch(1000, epoch=5, pid=8)) == (2, 2, False)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(44, pid=7), now_ms=0)
    assert offsets(log, pbatch(43, pid=7)) == (3, 3, False)


def test_sequence_wraps_after_int32_max(log: Log) -> None:
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert decrement_sequence(1, 3) == INT32_MAX - 1
    log.append(pbatch(INT32_MAX - 2, 2), now_ms=0)  # INT32_MAX-2, INT32_MAX-1
    wrapping = pbatch(INT32_MAX, 3)  # INT32_MAX, 0, 1
    assert offsets(log, wrapping) == (2, 4, False)
    assert log.producer_state.last_entry(PID).last_seq == 1  # type: ignore[union-attr]
    assert offsets(log, wrapping) == (2, 4, True)  # its retry is found despite the wrap
    assert offsets(log, pbatch(2)) == (5, 5, False)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(INT32_MAX), now_ms=0)


def test_several_batches_in_one_append_are_checked_in_order(log: Log) -> None:
    info = log.append(pbatch(0, 2) + pbatch(2, 1) + pbatch(3, 3), now_ms=0)
    assert (info.first_offset, info.last_offset, info.duplicate) == (0, 5, False)
    entry = log.producer_state.last_entry(PID)
    assert entry is not None and [b.last_seq for b in entry.batches] == [1, 2, 5]
    assert [b.first_offset for b in entry.batches] == [0, 2, 3]


def test_several_batches_in_one_append_are_all_or_nothing(log: Log) -> None:
    log.append(pbatch(0), now_ms=0)
    before = log.producer_state.last_entry(PID).copy()  # type: ignore[union-attr]
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(1, 2) + pbatch(3) + pbatch(9), now_ms=0)  # the third has a gap
    assert log.next_offset == 1 and log.active_segment.size_bytes == len(pbatch(0))
    assert log.producer_state.last_entry(PID) == before
    with pytest.raises(InvalidProducerEpochError):  # a later batch with a stale epoch
        log.append(pbatch(0, pid=9, epoch=2) + pbatch(1, pid=9, epoch=1), now_ms=0)
    assert log.producer_state.last_entry(9) is None and log.next_offset == 1


def test_several_producers_in_one_append(log: Log) -> None:
    info = log.append(pbatch(0, pid=1) + pbatch(5, pid=2) + pbatch(1, pid=1), now_ms=0)
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert log.producer_state.last_entry(1).last_seq == 1  # type: ignore[union-attr]
    assert log.producer_state.last_entry(2).last_seq == 5  # type: ignore[union-attr]


def test_batches_without_producer_id_are_not_tracked(log: Log) -> None:
    plain = encode_batch([(b"k", b"v", 1)])
    assert offsets(log, plain) == (0, 0, False)
    assert offsets(log, plain) == (1, 1, False)  # no producer id, no deduplication
    assert log.producer_state.is_empty()


def test_transactional_batches_are_refused(log: Log) -> None:
    log.append(pbatch(0, epoch=2), now_ms=0)
    with pytest.raises(InvalidTxnStateError) as raised:
        log.append(pbatch(1, epoch=2, transactional=True), now_ms=0)
    assert error_code_for(raised.value) is ErrorCode.INVALID_TXN_STATE
    with pytest.raises(InvalidProducerEpochError):
        log.append(pbatch(1, epoch=1, transactional=True), now_ms=0)
    assert log.next_offset == 1


def test_idle_producers_expire(log_dir: Path) -> None:
    cfg = dataclasses.replace(config(), producer_id_expiration_ms=10_000)
    log = open_log(log_dir, cfg)
    log.append(pbatch(0, 3, ts=1_000), now_ms=1_000)
    log.append(pbatch(0, pid=5, ts=1_000), now_ms=1_000)
    # before the check interval: still known (a gap is refused)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(7), now_ms=11_000)
    later = 1_000 + EXPIRATION_CHECK_INTERVAL_MS
    assert offsets_at(log, pbatch(7), later) == (4, 4)  # expired: unknown, any sequence
    assert log.producer_state.last_entry(5) is None


def offsets_at(log: Log, data: bytes, now_ms: int) -> tuple[int, int]:
    info = log.append(data, now_ms=now_ms)
    return info.first_offset, info.last_offset
