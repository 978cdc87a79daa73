"""``odradek dump-log`` given hostile files (issue 14, finding 12): it hung on a FIFO and took
1 GiB of memory on a 512 MiB decompression bomb. Run as a real command on real files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cramjam
import pytest

from odradek.protocol.batch_builder import encode_batch
from odradek.protocol.record_batch import HEADER_SIZE, LOG_OVERHEAD, Compression
from odradek.protocol.record_batch import recompute_crc as fix_crc

ROOT = Path(__file__).resolve().parents[2]
SEGMENT = "00000000000000000000.log"
MEASURE = """\
import resource, sys
from odradek.cli.main import main
status = main(sys.argv[1:])
print("maxrss_kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(status)
"""


def dump_log(*args: str | Path, timeout_s: float = 30) -> subprocess.CompletedProcess[str]:
    """Run ``odradek dump-log``; the last stderr line is the process's peak RSS in KiB."""
    return subprocess.run(
        [sys.executable, "-c", MEASURE, "dump-log", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout_s,
    )


def peak_mib(proc: subprocess.CompletedProcess[str]) -> float:
    last = proc.stderr.strip().splitlines()[-1].split()
    assert last[0] == "maxrss_kib", proc.stderr
    return int(last[1]) / 1024


@pytest.mark.parametrize("name", [SEGMENT, "00000000000000000000.index"])
def test_a_fifo_is_refused_not_waited_on(tmp_path: Path, name: str) -> None:
    fifo = tmp_path / name
    os.mkfifo(fifo)
    proc = dump_log(fifo, timeout_s=20)  # before: blocked in open() for a writer, forever
    assert proc.returncode == 2, proc
    assert "not a regular file" in proc.stderr


def bomb_batch(decompressed_mib: int) -> bytes:
    """One batch (valid header and CRC) whose zstd body expands to ``decompressed_mib`` MiB of
    zeros: concatenated 8 MiB frames of a few hundred bytes each."""
    frame = bytes(cramjam.zstd.compress(bytes(8 << 20)))
    body = frame * (decompressed_mib // 8)
    head = bytearray(encode_batch([(None, b"x", 1)], compression=Compression.ZSTD)[:HEADER_SIZE])
    head[8:12] = (HEADER_SIZE - LOG_OVERHEAD + len(body)).to_bytes(4, "big")
    data = bytearray(head + body)
    fix_crc(data)
    return bytes(data)


def test_a_decompression_bomb_is_not_expanded_past_the_ceiling(tmp_path: Path) -> None:
    segment = tmp_path / SEGMENT
    segment.write_bytes(bomb_batch(512))
    assert segment.stat().st_size < 100_000
    baseline = peak_mib(dump_log(segment))  # the shallow dump decompresses nothing
    proc = dump_log(segment, "--deep-iteration")
    assert proc.returncode == 2, proc
    assert (
        "not printed" in proc.stderr and "decompresses to more than 67108864 bytes" in proc.stderr
    )
    assert "compresscodec: zstd" in proc.stdout  # the batch line is still printed
    grown = peak_mib(proc) - baseline
    assert grown < 200, f"deep iteration grew the process by {grown:.0f} MiB"  # before: ~1 GiB


def test_a_batch_under_the_ceiling_still_decodes(tmp_path: Path) -> None:
    records = [(b"k%d" % i, b"v" * 1000, i) for i in range(50)]
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        segment = tmp_path / SEGMENT
        segment.write_bytes(encode_batch(records, compression=codec))
        proc = dump_log(segment, "--print-data-log")
        assert proc.returncode == 0, proc
        assert proc.stdout.count("| offset:") == 50
        proc = dump_log(segment, "--deep-iteration", "--max-decompressed-bytes", "10000")
        assert proc.returncode == 2, proc
        assert "decompresses to more than 10000 bytes" in proc.stderr
