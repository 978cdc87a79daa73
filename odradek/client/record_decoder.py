"""The pure-Python twin of the consumer's C record decoder (``odradek.client._record_decoder``):
one RecordBatch v2 records section into ConsumerRecords, built as they are taken.

The records are checked and decoded by :func:`odradek.protocol.records.record_columns`, the one
pure-Python record loop, whose rules are the C decoder's: both accept and reject the same
bodies and give the same records (``tests/client/test_record_decoder.py`` runs them side by
side). A field running past the body raises IndexError (a corrupt batch to
:class:`odradek.client.records.BatchCursor`).
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import repeat

from odradek.client.types import ConsumerRecord
from odradek.protocol.records import Headers, record_columns

__all__ = ["DecodedRecords"]

_new = tuple.__new__
_NO_HEADERS: Headers = []  # shared, never mutated


class DecodedRecords:
    """The ``count`` records of ``body``, checked and decoded into columns (the C decoder's
    ``Records``, same arguments); the records below ``min_offset`` are skipped the way the C
    decoder skips them (``bisect_left`` over the offsets, when the first one is below it).
    ``log_append_ts``: every record's timestamp (the batch's LogAppendTime), else ``None``.

    :meth:`take` builds the ConsumerRecords a chunk at a time (C-level ``map``/``zip``), so
    only the records being handed out exist as objects: few survive a garbage-collector pass
    (each ConsumerRecord is a GC-tracked tuple; a whole batch of them alive at once made the
    collector a third of the consumer's time). ``timestamps`` is an int when every record has
    the batch's LogAppendTime; ``headers`` ``None`` when no record has any."""

    __slots__ = (
        "headers",
        "keys",
        "offsets",
        "partition",
        "start",
        "timestamps",
        "topic",
        "ts_type",
        "values",
    )

    def __init__(
        self,
        body: bytes,
        count: int,
        base_offset: int,
        base_ts: int,
        log_append_ts: int | None,
        ts_type: int,
        topic: str,
        partition: int,
        min_offset: int,
    ) -> None:
        offsets, timestamps, keys, values, headers = record_columns(
            body, count, base_offset, base_ts
        )
        self.topic = topic
        self.partition = partition
        self.ts_type = ts_type
        self.offsets = offsets
        self.timestamps = timestamps if log_append_ts is None else log_append_ts
        self.keys = keys
        self.values = values
        self.headers = [headers.get(i, _NO_HEADERS) for i in range(count)] if headers else None
        # records before it were taken (or are below the position)
        self.start = bisect_left(offsets, min_offset) if count and offsets[0] < min_offset else 0

    def __len__(self) -> int:
        return len(self.values) - self.start

    def take(self, n: int) -> list[ConsumerRecord]:
        """The next ``n`` records (fewer if fewer are left), as ConsumerRecords."""
        i = self.start
        j = max(i, min(i + n, len(self.values)))
        self.start = j
        ts = self.timestamps
        return list(
            map(
                _new,
                repeat(ConsumerRecord),
                zip(
                    repeat(self.topic),
                    repeat(self.partition),
                    self.offsets[i:j],
                    repeat(ts) if type(ts) is int else ts[i:j],  # type: ignore[index]
                    repeat(self.ts_type),
                    self.keys[i:j],
                    self.values[i:j],
                    repeat(_NO_HEADERS) if self.headers is None else self.headers[i:j],
                ),
            )
        )
