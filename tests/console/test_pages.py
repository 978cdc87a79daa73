"""The console's read-only pages in a real Chromium: topics, topic -> partition -> messages,
the message formats, browsing by timestamp, the rates chart; screenshots of each.

The data is produced here with the blocking client (explicit timestamps, so a timestamp
lookup has one right answer) and the pages are checked against it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from odradek.client import Admin, Consumer, NewTopic, Producer
from tests.broker_process import REPO, BrokerProcess
from tests.console.conftest import Console

TOPIC = "orders"
RECORDS = 30
BASE_MS = 1_795_000_000_000  # 2026-11-17T...: partition 0's first record
STEP_MS = 60_000
README_SCREENSHOT = REPO / "docs" / "console.png"  # refreshed by `make screenshots` only
POSITIVE = re.compile(r"^(?!0(\.0)?$)\d+(\.\d+)?$")  # a rate above zero


@pytest.fixture(scope="module")
def orders(broker: BrokerProcess) -> Iterator[str]:
    """``orders``: 3 partitions; partition 0 holds RECORDS JSON records one minute apart, in
    batches of 10 and small segments (so its page lists several)."""
    configs = {"retention.ms": "604800000", "segment.bytes": "1024"}
    with Admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 3, 1, configs)])
    with Producer(broker.bootstrap, acks="all") as producer:
        for i in range(RECORDS):
            value = json.dumps({"order": i, "item": "widget", "qty": i % 5}).encode()
            producer.send(
                TOPIC,
                value,
                key=f"customer-{i}".encode(),
                partition=0,
                timestamp_ms=BASE_MS + i * STEP_MS,
                headers=[("source", b"test")],
            )
            if i % 10 == 9:
                producer.flush()  # one batch per 10 records
        for _ in range(5):
            producer.send(TOPIC, b"other partition", partition=1)
        producer.flush()
    yield TOPIC


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def test_topics_page_lists_the_topic_with_counts(
    page: Page, console: Console, orders: str, tmp_path: Path
) -> None:
    page.goto(console.url + "/")
    row = page.locator("#topics-table tbody tr", has_text=orders)
    expect(row).to_be_visible()
    cells = row.locator("td")
    expect(cells.nth(0)).to_have_text(orders)
    expect(cells.nth(1)).to_have_text("3")  # partitions
    expect(cells.nth(2)).to_have_text(str(RECORDS + 5))  # records
    expect(cells.nth(3)).to_have_text(re.compile(r"^\d+(\.\d)? (B|KiB)$"))
    expect(page.locator("header nav a.current")).to_have_text("Topics")
    expect(page.locator("#error")).to_be_hidden()
    page.screenshot(path=tmp_path / "topics.png", full_page=True)
    shot = tmp_path / "console.png"
    page.screenshot(path=shot)
    assert shot.stat().st_size > 10_000
    if os.environ.get("ODRADEK_UPDATE_SCREENSHOTS") == "1":  # `make screenshots`: the README's
        shutil.copyfile(shot, README_SCREENSHOT)


def test_click_through_topic_partition_messages(
    page: Page, console: Console, orders: str, tmp_path: Path
) -> None:
    page.goto(console.url + "/")
    page.get_by_role("link", name=orders, exact=True).click()
    expect(page.locator("#title")).to_have_text(f"Topic {orders}")
    partitions = page.locator("#partitions-table tbody tr")
    expect(partitions).to_have_count(3)
    first = partitions.nth(0).locator("td")
    expect(first.nth(1)).to_have_text("0")  # log start offset
    expect(first.nth(2)).to_have_text(str(RECORDS))  # log end offset
    retention = page.locator("#configs-table tbody tr").filter(
        has=page.locator("td:first-child", has_text=re.compile(r"^retention\.ms$"))
    )
    expect(retention.locator("td").nth(1)).to_have_text("604800000")
    expect(retention.locator("td").nth(2)).to_have_text("topic override")
    page.screenshot(path=tmp_path / "topic.png", full_page=True)

    partitions.nth(0).locator("td").nth(0).get_by_role("link").click()
    expect(page.locator("#title")).to_have_text(f"Partition {orders}-0")
    summary = page.locator("#partition-table")
    expect(summary.locator("tr", has_text="Log end offset").locator("td").nth(1)).to_have_text(
        str(RECORDS)
    )
    expect(summary.locator("tr", has_text="Log dir").locator("td").nth(1)).to_contain_text("logs")
    segments = page.locator("#segments-table tbody tr")
    expect(segments.first.locator("td").nth(0)).to_have_text("00000000000000000000.log")
    expect(segments.first.locator("td").nth(1)).to_contain_text("0 - ")
    expect(segments.last.locator("td").nth(4)).to_have_text("active")
    assert segments.count() >= 2  # 1 KiB segments, 3 batches
    page.screenshot(path=tmp_path / "partition.png", full_page=True)

    page.get_by_role("link", name="Browse messages →").click()
    expect(page.locator("#title")).to_have_text(f"Messages of {orders}-0")
    rows = page.locator("#messages-table tbody tr")
    expect(rows).to_have_count(20)  # the page's default count
    cells = rows.nth(3).locator("td")
    expect(cells.nth(0)).to_have_text("3")
    expect(cells.nth(1)).to_have_text(_iso(BASE_MS + 3 * STEP_MS) + "Z")
    expect(cells.nth(2)).to_have_text("customer-3")
    expect(cells.nth(3)).to_have_text('{"order": 3, "item": "widget", "qty": 3}')
    expect(cells.nth(4)).to_have_text("source: test")
    next_page = page.locator("#next")
    expect(next_page).to_be_visible()
    next_page.click()
    expect(rows).to_have_count(RECORDS - 20)
    expect(rows.nth(0).locator("td").nth(0)).to_have_text("20")
    expect(page.locator("#next")).to_be_hidden()
    page.screenshot(path=tmp_path / "messages.png", full_page=True)


def test_messages_as_json_and_hex(page: Page, console: Console, orders: str) -> None:
    page.goto(f"{console.url}/messages?topic={orders}&partition=0&offset=7&limit=2")
    expect(page.locator("#messages-table tbody tr")).to_have_count(2)
    assert page.locator("#browse-offset").input_value() == "7"  # the form shows the URL
    page.select_option("#browse-format", "json")
    page.click("#browse-button")
    value = page.locator("#messages-table tbody tr").nth(0).locator("td").nth(3).locator("pre")
    expect(value).to_have_text('{\n  "order": 7,\n  "item": "widget",\n  "qty": 2\n}')
    key_note = page.locator("#messages-table tbody tr").nth(0).locator("td").nth(2)
    expect(key_note).to_contain_text("not JSON: shown as text")
    page.select_option("#browse-format", "hex")
    page.click("#browse-button")
    key = page.locator("#messages-table tbody tr").nth(0).locator("td").nth(2).locator("pre")
    expect(key).to_have_text("00000000  63 75 73 74 6f 6d 65 72 2d 37" + " " * 19 + "  customer-7")
    assert page.locator("#browse-format").input_value() == "hex"


def test_browse_by_timestamp(page: Page, console: Console, orders: str, tmp_path: Path) -> None:
    page.goto(f"{console.url}/messages?topic={orders}&partition=0")
    page.select_option("#browse-by", "timestamp")
    expect(page.locator("#browse-time")).to_be_visible()
    expect(page.locator("#browse-offset")).to_be_hidden()
    # half a minute after record 12: the first record at or after it is 13
    page.fill("#browse-time", _iso(BASE_MS + 12 * STEP_MS + 30_000))
    page.fill("#browse-limit", "5")
    page.click("#browse-button")
    rows = page.locator("#messages-table tbody tr")
    expect(rows).to_have_count(5)
    expect(rows.nth(0).locator("td").nth(0)).to_have_text("13")
    expect(rows.nth(0).locator("td").nth(1)).to_have_text(_iso(BASE_MS + 13 * STEP_MS) + "Z")
    expect(page.locator("#range")).to_contain_text("from offset 13")
    assert f"timestamp_ms={BASE_MS + 12 * STEP_MS + 30_000}" in page.url
    page.screenshot(path=tmp_path / "by-timestamp.png", full_page=True)
    # after the last record: nothing to show, no error
    page.fill("#browse-time", _iso(BASE_MS + RECORDS * STEP_MS))
    page.click("#browse-button")
    expect(page.locator("#range")).to_contain_text("showing 0 record(s)")
    expect(page.locator("#error")).to_be_hidden()


def test_rates_chart_shows_produced_and_consumed_records(
    page: Page, console: Console, broker: BrokerProcess, orders: str, tmp_path: Path
) -> None:
    page.goto(console.url + "/rates")
    chart = page.locator("#rates-chart")
    expect(chart).to_be_visible()
    stop = threading.Event()
    failures: list[BaseException] = []

    def produce() -> None:  # a steady trickle while the page polls
        try:
            with Producer(broker.bootstrap, linger_ms=0) as producer:
                while not stop.is_set():
                    producer.send(orders, b"rate", partition=2).result(timeout=10)
        except BaseException as exc:
            failures.append(exc)

    def consume() -> None:  # a group reading and committing as it goes
        try:
            with Consumer(
                bootstrap_servers=broker.bootstrap,
                group_id="rates-readers",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
            ) as consumer:
                consumer.subscribe([orders])
                while not stop.is_set():
                    if consumer.poll(timeout_ms=200, max_records=20):
                        consumer.commit()
        except BaseException as exc:
            failures.append(exc)

    workers = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for worker in workers:
        worker.start()
    try:
        rows = page.locator("#latest-table tbody tr")
        produced = rows.filter(has_text=orders).locator("td").nth(3)
        expect(produced).to_have_text(POSITIVE, timeout=30_000)
        consumed = rows.filter(has_text="rates-readers").locator("td").nth(3)
        expect(consumed).to_have_text(POSITIVE, timeout=30_000)
        for line in ("produce", "consume"):
            points = chart.locator(f"polyline.{line}")
            expect(points).to_have_attribute("points", re.compile(r"\S+ \S+"))  # 2 or more
        page.screenshot(path=tmp_path / "rates.png", full_page=True)
    finally:
        stop.set()
        for worker in workers:
            worker.join()
    assert not failures, failures
    top = page.locator("#chart-max").text_content() or ""
    assert float(top.removesuffix("/s")) > 0, top
