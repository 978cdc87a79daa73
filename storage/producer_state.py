"""Idempotent-producer state of one partition: Kafka's ``ProducerStateManager``,
``ProducerStateEntry``, ``BatchMetadata`` and ``ProducerAppendInfo`` (non-transactional).

What is kept, per producer id that appended a v2 batch with ``producerId >= 0``
(header fields: producerId int64 @43, producerEpoch int16 @51, baseSequence int32 @53,
lastOffsetDelta int32 @23, maxTimestamp int64 @35):

- its epoch, the max timestamp of its last batch (``last_timestamp_ms``, for expiry), and
- the metadata of its last :data:`BATCHES_TO_RETAIN` (5) batches of that epoch: last sequence,
  last offset, offset delta (lastOffsetDelta), max timestamp. First sequence and first offset
  are derived (sequence arithmetic wraps at Int32 max: after 2147483647 comes 0).

Rules an append from a client must pass, batch by batch, in :meth:`ProducerStateManager.check`
(Kafka's ``UnifiedLog.analyzeAndValidateProducerState`` and ``ProducerAppendInfo``):

1. **Duplicate**: the batch's epoch is the producer's current epoch and its first and last
   sequence equal those of one of the retained batches (looked up in the state *before* this
   append, as Kafka does): the append writes nothing and answers that batch's offsets.
2. **Transactional batch** (attribute bit 4): this broker has no transaction coordinator, so no
   transaction is ever ongoing: a stale epoch is INVALID_PRODUCER_EPOCH, anything else
   INVALID_TXN_STATE (48) — what Kafka's leader answers for a transactional batch outside a
   verified transaction (``transaction.partition.verification.enable``, the default).
   (Control batches never get here: :mod:`odradek.protocol.validate` refuses them from a
   client, INVALID_RECORD, as ``LogValidator`` does.)
3. **Epoch**: an epoch below the producer's is :class:`InvalidProducerEpochError` (47).
4. **Sequence**: a new epoch must start at sequence 0 unless the producer is unknown; within
   the epoch the first sequence must follow the last (``last + 1``, or 0 after Int32 max);
   otherwise :class:`OutOfOrderSequenceError` (45). A producer this partition has no state for
   (never seen, expired, or lost with its snapshot) is accepted at *any* sequence: current
   Kafka's rule for idempotent producers outside transactions v2.

Several batches of one append are checked in order against a working copy that each accepted
batch updates; the copy replaces the state only once the whole append is written
(:meth:`ProducerStateManager.apply`), so a failing batch leaves the state and the log as they
were. Replaying the log at load (:func:`odradek.storage.producer_snapshot.rebuild`) applies
batches without checks (Kafka's ``AppendOrigin.REPLICATION``).

Expiry: a producer whose ``last_timestamp_ms`` is ``producer.id.expiration.ms`` (default
86400000) or more in the past is forgotten, checked at most every
``producer.id.expiration.check.interval.ms`` (600000, Kafka's default) on append, and when a
snapshot is loaded.

Derived, not authoritative: the state is rebuilt from the ``.snapshot`` files and the log
(:mod:`odradek.storage.producer_snapshot`). Single writer: only the thread appending to the log
touches it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

from odradek.protocol.record_batch import BatchHeader
from odradek.storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
)

__all__ = [
    "BATCHES_TO_RETAIN",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "EXPIRATION_CHECK_INTERVAL_MS",
    "BatchMetadata",
    "ProducerStateEntry",
    "ProducerStateManager",
    "decrement_sequence",
    "increment_sequence",
]

BATCHES_TO_RETAIN = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
EXPIRATION_CHECK_INTERVAL_MS = 600_000
INT32_MAX = 0x7FFF_FFFF
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` with Kafka's wrap after Int32 max (to 0)."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement``, the inverse of :func:`increment_sequence`."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class BatchMetadata(NamedTuple):
    """One retained batch of a producer (Kafka's ``BatchMetadata``)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp_ms: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerStateEntry:
    """The state of one producer id: its epoch and its last (up to 5) batches, oldest first."""

    __slots__ = (
        "batches",
        "coordinator_epoch",
        "last_timestamp_ms",
        "producer_epoch",
        "producer_id",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        last_timestamp_ms: int = NO_TIMESTAMP,
        batches: Iterable[BatchMetadata] = (),
        coordinator_epoch: int = -1,
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.last_timestamp_ms = last_timestamp_ms
        self.coordinator_epoch = coordinator_epoch
        self.batches: deque[BatchMetadata] = deque(batches, maxlen=BATCHES_TO_RETAIN)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The retained batch with exactly this sequence range in the current epoch, if any."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.last_seq == last_seq and batch.first_seq == first_seq:
                return batch
        return None

    def add_batch(self, epoch: int, batch: BatchMetadata) -> None:
        if epoch != self.producer_epoch:  # a new epoch starts a new history
            self.batches.clear()
            self.producer_epoch = epoch
        self.batches.append(batch)  # the deque drops the oldest beyond 5
        self.last_timestamp_ms = batch.timestamp_ms

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.last_timestamp_ms,
            self.batches,
            self.coordinator_epoch,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateEntry):
            return NotImplemented
        return (
            self.producer_id,
            self.producer_epoch,
            self.last_timestamp_ms,
            list(self.batches),
            self.coordinator_epoch,
        ) == (
            other.producer_id,
            other.producer_epoch,
            other.last_timestamp_ms,
            list(other.batches),
            other.coordinator_epoch,
        )

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(id={self.producer_id}, epoch={self.producer_epoch}, "
            f"last_timestamp_ms={self.last_timestamp_ms}, batches={list(self.batches)})"
        )


class ProducerStateManager:
    """Every producer's state in one partition, plus where that state was last snapshotted.

    ``map_end_offset``: the state covers every batch below it. ``last_snapshot_offset``: the
    offset of the newest ``.snapshot`` file written or loaded (a snapshot is only written when
    ``map_end_offset`` passed it). File handling lives in
    :mod:`odradek.storage.producer_snapshot`.
    """

    def __init__(self, expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0
        self.last_snapshot_offset = 0
        self.next_expiry_check_ms = 0

    def is_empty(self) -> bool:
        return not self.producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    # -- the leader's checks ---------------------------------------------------------------

    def check(
        self, batches: Iterable[tuple[BatchHeader, int, int]]
    ) -> tuple[BatchMetadata | None, dict[int, ProducerStateEntry]]:
        """Check a client's append, given each batch's header, assigned base offset and the
        maxTimestamp it is stored with (LogAppendTime stamps it).

        Returns ``(duplicate, updated)``: the retained batch a batch duplicates (then nothing
        may be written), or ``None`` and the producers' new entries, to :meth:`apply` once the
        append is written. Raises :class:`InvalidProducerEpochError`,
        :class:`OutOfOrderSequenceError` or :class:`InvalidTxnStateError` (module docstring);
        the state is never changed here.
        """
        updated: dict[int, ProducerStateEntry] = {}
        for header, base_offset, max_timestamp in batches:
            producer_id = header.producer_id
            if producer_id < 0:
                continue
            epoch = header.producer_epoch
            first_seq = header.base_sequence
            last_seq = increment_sequence(first_seq, header.last_offset_delta)
            current = self.producers.get(producer_id)
            if current is not None:
                duplicate = current.find_duplicate(epoch, first_seq, last_seq)
                if duplicate is not None:
                    return duplicate, {}
            if header.is_transactional:
                if current is not None and epoch < current.producer_epoch:
                    raise InvalidProducerEpochError(
                        f"epoch of producer {producer_id} is {epoch}, which is smaller than the "
                        f"last seen epoch {current.producer_epoch}"
                    )
                raise InvalidTxnStateError(
                    f"transactional batch of producer {producer_id}: this broker runs no "
                    "transaction coordinator, so no transaction is ongoing"
                )
            pending = updated.get(producer_id)
            if pending is None:
                base = current if current is not None else ProducerStateEntry(producer_id)
                # Kafka's ProducerAppendInfo: the current epoch, none of the current batches.
                pending = ProducerStateEntry(
                    producer_id,
                    base.producer_epoch,
                    base.last_timestamp_ms,
                    (),
                    base.coordinator_epoch,
                )
                updated[producer_id] = pending
            _check_epoch_and_sequence(current, pending, epoch, first_seq, base_offset)
            pending.add_batch(
                epoch,
                BatchMetadata(
                    last_seq,
                    base_offset + header.last_offset_delta,
                    header.last_offset_delta,
                    max_timestamp,
                ),
            )
        return None, updated

    def apply(self, updated: dict[int, ProducerStateEntry]) -> None:
        """Merge what :meth:`check` returned into the state (Kafka's ``update``)."""
        for producer_id, pending in updated.items():
            current = self.producers.get(producer_id)
            if current is None:
                self.producers[producer_id] = pending
                continue
            for batch in pending.batches:
                current.add_batch(pending.producer_epoch, batch)
            current.producer_epoch = pending.producer_epoch
            current.last_timestamp_ms = pending.last_timestamp_ms

    # -- replay, expiry, log start ---------------------------------------------------------

    def replay(self, header: BatchHeader) -> None:
        """Apply one batch read back from the log, without checks (its offsets are final)."""
        producer_id = header.producer_id
        if producer_id < 0 or header.is_control:
            return
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        entry.add_batch(
            header.producer_epoch,
            BatchMetadata(
                increment_sequence(header.base_sequence, header.last_offset_delta),
                header.base_offset + header.last_offset_delta,
                header.last_offset_delta,
                header.max_timestamp,
            ),
        )

    def is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return now_ms - entry.last_timestamp_ms >= self.expiration_ms

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``; returns how many."""
        expired = [pid for pid, e in self.producers.items() if self.is_expired(e, now_ms)]
        for producer_id in expired:
            del self.producers[producer_id]
        self.next_expiry_check_ms = now_ms + EXPIRATION_CHECK_INTERVAL_MS
        return len(expired)

    def maybe_remove_expired_producers(self, now_ms: int) -> None:
        """:meth:`remove_expired_producers` at most once per check interval (cheap on append)."""
        if now_ms >= self.next_expiry_check_ms:
            self.remove_expired_producers(now_ms)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Retention or DeleteRecords moved the log start: the state itself is kept (Kafka)."""
        self.map_end_offset = max(self.map_end_offset, log_start_offset)


def _check_epoch_and_sequence(
    current: ProducerStateEntry | None,
    pending: ProducerStateEntry,
    epoch: int,
    first_seq: int,
    offset: int,
) -> None:
    """Kafka's ``checkProducerEpoch`` and ``checkSequence`` for a client's data batch."""
    producer_id = pending.producer_id
    if epoch < pending.producer_epoch:
        raise InvalidProducerEpochError(
            f"epoch of producer {producer_id} at offset {offset} is {epoch}, which is smaller "
            f"than the last seen epoch {pending.producer_epoch}"
        )
    if epoch != pending.producer_epoch:
        if first_seq != 0 and pending.producer_epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequenceError(
                f"invalid sequence number for new epoch {epoch} of producer {producer_id} at "
                f"offset {offset}: {first_seq} (must be 0; current epoch "
                f"{pending.producer_epoch})"
            )
        return
    current_epoch = current.producer_epoch if current is not None else NO_PRODUCER_EPOCH
    if pending.batches:
        last_seq = pending.last_seq
    elif current is not None and epoch == current.producer_epoch:
        last_seq = current.last_seq
    else:
        last_seq = NO_SEQUENCE
    # No known epoch (a producer never seen, or whose batches retention removed): any sequence.
    if current_epoch != NO_PRODUCER_EPOCH and not _in_sequence(last_seq, first_seq):
        raise OutOfOrderSequenceError(
            f"out of order sequence number for producer {producer_id} at offset {offset}: "
            f"{first_seq} (incoming), {last_seq} (current end sequence number)"
        )
