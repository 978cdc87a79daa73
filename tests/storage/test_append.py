"""storage.append: the checks of an append's first step that no honest request can reach over
the wire (2^31 records do not fit in a request), exercised with the bound lowered."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.record_batch import CorruptRecordError, InvalidRecordError
from odradek.storage import append as append_module
from odradek.storage.append import prepare_append
from odradek.storage.config import LogConfig
from odradek.storage.errors import RecordTooLargeError
from tests.broker.forge import zstd_bomb
from tests.storage.conftest import batch, config, open_log


def test_one_append_spans_at_most_what_a_segment_indexes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(append_module, "INT32_MAX", 5)  # a segment indexes 6 offsets
    config = LogConfig()
    assert prepare_append(batch(3) + batch(3), config, "t-0").record_count == 6
    with pytest.raises(RecordTooLargeError, match="7 records in one append exceed the 6"):
        prepare_append(batch(3) + batch(4), config, "t-0")


def test_a_prepared_append_remembers_its_config() -> None:
    config = LogConfig()
    prepared = prepare_append(batch(2), config, "t-0")
    assert prepared.config is config and prepared.size_bytes == len(batch(2))


def test_an_append_prepared_under_an_old_config_is_validated_again(log_dir: Path) -> None:
    """The broker prepares in a worker thread; AlterConfigs may change the topic meanwhile:
    a keyless record prepared for a plain topic is refused once the topic is compacted."""
    log = open_log(log_dir)
    keyless = encode_batch([(None, b"v")])
    prepared = log.prepare_append(keyless)
    log.config = config(**{"cleanup.policy": "compact"})
    with pytest.raises(InvalidRecordError, match="without key"):
        log.append(keyless, now_ms=0, prepared=prepared)
    assert log.next_offset == 0


def test_an_oversized_batch_is_refused_before_it_is_decompressed() -> None:
    """As Kafka: max.message.bytes is checked on the batch as sent, before any record work
    (a bomb over the limit costs no decompression: its refusal names the size, not a codec)."""
    bomb = zstd_bomb(64)
    with pytest.raises(RecordTooLargeError, match=r"exceeds max\.message\.bytes 1000"):
        prepare_append(bomb, config(max_message_bytes=1000), "t-0")


def test_a_length_past_the_request_is_corrupt_not_too_large() -> None:
    """The early size check reads only a plausible header: a batchLength beyond the bytes sent
    is a truncated (corrupt) batch, whatever it claims."""
    lying = bytearray(batch(1))
    struct.pack_into(">i", lying, 8, 50_000_000)
    with pytest.raises(CorruptRecordError, match="truncated"):
        prepare_append(bytes(lying), config(max_message_bytes=1000), "t-0")
