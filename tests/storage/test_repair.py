"""storage.repair: every damaged range is found, only it is cut out, and the log loads again."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.storage.errors import LogCorruptedError
from odradek.storage.repair import inspect_partition, repair_partition
from tests.storage.conftest import batch, open_log
from tests.storage.test_recovery import CFG, build, crash, flip_byte, layout, name, offsets


def test_two_damaged_batches_cost_only_their_own_records(log_dir: Path) -> None:
    log = build(log_dir, 12)  # segments 0, 8, 16; two-record batches
    batches = layout(log)
    crash(log)
    hit = [batches[1], batches[2], batches[5]]  # two adjacent in segment 0, one in segment 8
    for victim in hit:
        flip_byte(log_dir / name(victim.segment), victim.position + 70)
    with pytest.raises(LogCorruptedError):
        open_log(log_dir, CFG, recovery_point=0)

    reports = inspect_partition(log_dir)
    ranges = {
        r.path.name: [(d.start, d.end, d.first_lost_offset) for d in r.damaged] for r in reports
    }
    b1, b2, b3, b5 = batches[1], batches[2], batches[3], batches[5]
    assert ranges == {
        name(0): [(b1.position, b3.position, 2)],  # resumes at the first valid batch after
        name(8): [(b5.position, b5.position + b5.size, 10)],
        name(16): [],
    }
    assert [d.resumes_at_offset for d in reports[0].damaged] == [6]
    saved = repair_partition(reports)
    assert [p.name for p in saved] == [
        f"{name(0)}.damaged-{b1.position}",
        f"{name(8)}.damaged-{b5.position}",
    ]
    assert saved[0].stat().st_size == b1.size + b2.size
    assert all(not r.damaged for r in inspect_partition(log_dir))

    log = open_log(log_dir, CFG, recovery_point=0)
    lost = {2, 3, 4, 5, 10, 11}
    assert offsets(log) == [o for o in range(24) if o not in lost]
    assert log.append(batch(1), now_ms=0).first_offset == 24
    log.close()


def test_damage_running_to_the_end_of_a_segment(log_dir: Path) -> None:
    log = build(log_dir, 12)
    batches = layout(log)
    crash(log)
    last_of_segment_0 = batches[3]
    with open(log_dir / name(0), "r+b") as f:
        f.truncate(last_of_segment_0.position + 30)  # cut short, in a segment that is not last
    (report, *_) = inspect_partition(log_dir)
    (damage,) = report.damaged
    assert (damage.start, damage.end, damage.resumes_at_offset) == (
        last_of_segment_0.position,
        last_of_segment_0.position + 30,
        None,
    )
    repair_partition(inspect_partition(log_dir))
    log = open_log(log_dir, CFG, recovery_point=0)
    assert offsets(log) == [o for o in range(24) if o not in (6, 7)]
    log.close()
