"""Instructions a broker process executes for a workload, counted by valgrind's callgrind.

Wall-clock and CPU-time figures on this shared 2-core machine spread by ±15 % from run to run
(bench/README.md); an instruction count does not: the same broker code serving the same
requests executes the same instructions whatever else the machine runs (repeats here agree to
within 0.2 %). It cannot see waiting, cache misses or the kernel's share, so it complements the
timed figures rather than replacing them.

How: the broker runs as ``valgrind --tool=callgrind python -m odradek.cli.main serve ...``
(about 50 times slower, so workloads are small). Around each workload ``callgrind_control -z``
zeroes the counters and ``callgrind_control -d`` dumps them; the dump's ``summary:`` line is
the instruction count (Ir) since the zeroing. Valgrind comes from Debian's ``valgrind``
package; :func:`available` says whether it is on the ``PATH``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.broker_process import BrokerProcess

__all__ = ["CallgrindBroker", "available"]

_DUMP_WAIT_S = 30.0


def available() -> bool:
    return shutil.which("valgrind") is not None and shutil.which("callgrind_control") is not None


class CallgrindBroker:
    """A :class:`BrokerProcess` under callgrind; use as a context manager (start, stop)."""

    def __init__(self, log_dirs: list[Path], out_dir: Path, overrides: list[str] = ()) -> None:
        self.out_dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        program = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_dir}/callgrind.%p"]
        self.broker = BrokerProcess(
            log_dirs,
            overrides=list(overrides),
            program=[*program, sys.executable, "-m", "odradek.cli.main"],
        )

    def __enter__(self) -> CallgrindBroker:
        self.broker.start(timeout_s=600)  # imports alone take a minute under valgrind
        return self

    def __exit__(self, *exc: object) -> None:
        self.broker.stop(timeout_s=300)

    @property
    def port(self) -> int:
        assert self.broker.port is not None
        return self.broker.port

    def instructions(self, workload: Callable[[], None]) -> int:
        """Instructions the broker executed while ``workload()`` ran (Ir, all threads)."""
        pid = str(self.broker.process.pid)  # type: ignore[union-attr]
        subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True)
        workload()
        before = set(self.out_dir.glob("callgrind.*"))
        subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
        deadline = time.monotonic() + _DUMP_WAIT_S
        while time.monotonic() < deadline:
            for dump in set(self.out_dir.glob("callgrind.*")) - before:
                for line in dump.read_text().splitlines():
                    if line.startswith("summary:"):
                        dump.unlink()
                        return int(line.split()[1])
            time.sleep(0.1)
        raise RuntimeError(f"callgrind wrote no dump for pid {pid} in {_DUMP_WAIT_S} s")
