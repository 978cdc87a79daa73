"""The reliability runs' counts, printed at the end of every pytest run that ran them (captured
output is shown only for failures, and ``make test`` must show the power-cut counts either way)."""

from __future__ import annotations

from typing import Any

SUMMARIES: list[str] = []  # lines the runs add (tests.reliability.test_powercut_chaos)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if SUMMARIES:
        terminalreporter.section("reliability counts")
        for line in SUMMARIES:
            terminalreporter.write_line(line)
