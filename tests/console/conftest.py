"""Fixtures for the console's browser tests: a real broker process, the real console
(``odradek console`` as a subprocess on an ephemeral port) and a real headless Chromium
(Debian's, driven by Playwright). One broker and one console serve the whole package; each
module launches its own browser.

Chromium missing is a failure, not a skip: ``make install`` installs Debian's ``chromium``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.broker_process import REPO, BrokerProcess

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
BROKER_OVERRIDES = [
    "group.initial.rebalance.delay.ms=0",
    "group.min.session.timeout.ms=200",
    "message.max.bytes=4194304",  # test_hostile produces a 2 MiB value
]
RATE_INTERVAL_MS = 300


class Console:
    """A running ``odradek console`` process and its base URL."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "odradek.cli.main",
                "console",
                "--bootstrap-server",
                bootstrap,
                "--listen",
                "127.0.0.1:0",
                "--rate-interval-ms",
                str(RATE_INTERVAL_MS),
            ],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # printed once the socket listens
        if not line.startswith("odradek console: http://"):
            self.process.kill()
            raise RuntimeError(f"console did not start: {line!r} {self.process.stderr.read()}")
        self.url = line.split()[2].rstrip("/")

    def stop(self) -> tuple[int, str]:
        """SIGTERM; the exit status and what the console wrote on stderr."""
        self.process.terminate()
        try:
            _, err = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        return self.process.returncode, err


@pytest.fixture(scope="package")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        [tmp_path_factory.mktemp("console") / "logs"], overrides=BROKER_OVERRIDES
    )
    process.start()
    yield process
    assert process.stop() == 0


@pytest.fixture(scope="package")
def console(broker: BrokerProcess) -> Iterator[Console]:
    server = Console(broker.bootstrap)
    yield server
    status, err = server.stop()
    # uvicorn shuts down gracefully, then re-raises the signal it caught: killed by SIGTERM
    assert status == -signal.SIGTERM, err
    assert "Traceback" not in err, err


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make install` installs Debian's chromium")
    with sync_playwright() as playwright:
        # a non-persistent launch: Playwright gives Chromium a fresh, empty profile directory
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page_errors() -> list[str]:
    """Console errors (CSP violations among them) and uncaught exceptions of ``page``; a test
    that provokes one on purpose removes it, and any left fail the test."""
    return []


@pytest.fixture
def page(browser: Browser, page_errors: list[str]) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    new_page = context.new_page()
    new_page.on(
        "console", lambda msg: page_errors.append(msg.text) if msg.type == "error" else None
    )
    new_page.on("pageerror", lambda exc: page_errors.append(f"uncaught: {exc}"))
    new_page.set_default_timeout(15_000)
    yield new_page
    context.close()
    assert not page_errors, page_errors
