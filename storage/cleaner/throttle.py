"""Kafka's ``Throttler``: keep the cleaner's I/O under ``log.cleaner.io.max.bytes.per.second``.

The cleaner reports every byte it reads and writes (``throttler(n_bytes)``). Once per check
interval the observed rate is compared with the desired one; if it is higher, the caller
sleeps long enough to bring the average back down. The clock and the sleep are injected, so
tests run on a fake clock; the broker calls this only from the cleaner's worker thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Throttler"]


class Throttler:
    def __init__(
        self,
        bytes_per_second: float,
        *,
        clock_s: Callable[[], float] = time.monotonic,
        sleep_s: Callable[[float], None] = time.sleep,
        check_interval_s: float = 0.1,
    ) -> None:
        self.bytes_per_second = bytes_per_second
        self._clock_s = clock_s
        self._sleep_s = sleep_s
        self._check_interval_s = check_interval_s
        self._period_start_s = clock_s()
        self._observed_bytes = 0
        self.slept_s = 0.0  # total time spent sleeping (observability, tests)

    def __call__(self, n_bytes: int) -> None:
        if self.bytes_per_second <= 0 or self.bytes_per_second >= 1e300:
            return
        self._observed_bytes += n_bytes
        now = self._clock_s()
        elapsed = now - self._period_start_s
        if elapsed < self._check_interval_s:
            return
        wanted_s = self._observed_bytes / self.bytes_per_second
        if wanted_s > elapsed:
            self._sleep_s(wanted_s - elapsed)
            self.slept_s += wanted_s - elapsed
        self._period_start_s = self._clock_s()
        self._observed_bytes = 0
