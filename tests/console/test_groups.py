"""The console's group pages and its two writes in a real Chromium: lag going to zero while a
consumer reads, a reset of a group's offsets through the preview and the confirmation (and
refused while the group has a member), creating a topic through the confirmation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from odradek.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from tests.broker_process import BrokerProcess
from tests.console.conftest import Console

TOPIC = "payments"
PER_PARTITION = 100
TPS = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]


@pytest.fixture(scope="module")
def payments(broker: BrokerProcess) -> Iterator[str]:
    with Admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 2)])
    with Producer(broker.bootstrap, acks="all") as producer:
        for tp in TPS:
            for i in range(PER_PARTITION):
                producer.send(TOPIC, f"payment {i}".encode(), partition=tp.partition)
        producer.flush()
    yield TOPIC


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[Admin]:
    with Admin(broker.bootstrap) as client:
        yield client


def _lag_cells(page: Page, partition: int) -> Locator:
    row = page.locator("#lag-table tbody tr").nth(partition)
    return row.locator("td")


def _committed(admin: Admin, group: str) -> dict[TopicPartition, int]:
    return {tp: om.offset for tp, om in admin.list_group_offsets(group).items()}


def _consume(consumer: Consumer, until_total: int, seen: int) -> int:
    while seen < until_total:
        batches = consumer.poll(timeout_ms=1000, max_records=until_total - seen)
        seen += sum(len(records) for records in batches.values())
    return seen


def test_lag_goes_to_zero_while_a_consumer_reads(
    page: Page,
    page_errors: list[str],
    console: Console,
    broker: BrokerProcess,
    admin: Admin,
    payments: str,
    tmp_path: Path,
) -> None:
    admin.alter_group_offsets("billing", dict.fromkeys(TPS, 0))
    page.goto(console.url + "/groups")
    row = page.locator("#groups-table tbody tr", has_text="billing")
    expect(row.locator("td").nth(1)).to_have_text("Empty")
    expect(row.locator("td").nth(3)).to_have_text(str(2 * PER_PARTITION))
    page.screenshot(path=tmp_path / "groups.png", full_page=True)
    row.get_by_role("link", name="billing").click()
    expect(page.locator("#title")).to_have_text("Consumer group billing")
    for partition in (0, 1):
        cells = _lag_cells(page, partition)
        expect(cells.nth(2)).to_have_text("0")  # committed
        expect(cells.nth(3)).to_have_text(str(PER_PARTITION))  # log end
        expect(cells.nth(4)).to_have_text(str(PER_PARTITION))  # lag

    consumer = Consumer(
        bootstrap_servers=broker.bootstrap,
        group_id="billing",
        client_id="billing-reader",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        consumer.subscribe([TOPIC])
        seen = _consume(consumer, 120, 0)
        consumer.commit()
        positions = {tp.partition: consumer.position(tp) for tp in TPS}
        assert sum(positions.values()) == seen
        expect(page.locator("#state")).to_have_text(
            "State Stable, assignor range, 1 member(s).", timeout=15_000
        )
        expect(page.locator("#members-table tbody tr td").nth(1)).to_have_text("billing-reader")
        for partition in (0, 1):
            lag = str(PER_PARTITION - positions[partition])
            expect(_lag_cells(page, partition).nth(4)).to_have_text(lag)
        page.screenshot(path=tmp_path / "group-reading.png", full_page=True)

        # a group with a member cannot be reset: the preview is refused, nothing is shown
        page.fill("#reset-topic", TOPIC)
        page.click("#reset-button")
        expect(page.locator("#error")).to_contain_text("offsets can only be reset while")
        expect(page.locator("#reset-confirm")).to_be_hidden()
        page_errors.remove(
            "Failed to load resource: the server responded with a status of 400 (Bad Request)"
        )

        _consume(consumer, 2 * PER_PARTITION, seen)
        consumer.commit()
        for partition in (0, 1):
            expect(_lag_cells(page, partition).nth(2)).to_have_text(str(PER_PARTITION))
            expect(_lag_cells(page, partition).nth(4)).to_have_text("0")
    finally:
        consumer.close()
    expect(page.locator("#state")).to_contain_text("State Empty", timeout=15_000)
    page.screenshot(path=tmp_path / "group-caught-up.png", full_page=True)


def test_reset_offsets_through_the_confirmation(
    page: Page, console: Console, admin: Admin, payments: str, tmp_path: Path
) -> None:
    admin.alter_group_offsets("audit", dict.fromkeys(TPS, PER_PARTITION))
    page.goto(console.url + "/group?id=audit")
    expect(_lag_cells(page, 0).nth(4)).to_have_text("0")
    page.fill("#reset-topic", TOPIC)
    page.select_option("#reset-target", "offset")
    page.fill("#reset-value", "40")
    page.click("#reset-button")
    confirm = page.locator("#reset-confirm")
    expect(confirm).to_be_visible()
    expect(page.locator("#reset-summary")).to_have_text(
        f"Reset group \u201caudit\u201d on topic \u201c{TOPIC}\u201d to offset 40? "
        "New committed offsets:"
    )
    preview = page.locator("#reset-preview-table tbody tr")
    expect(preview).to_have_count(2)
    expect(preview.nth(1).locator("td")).to_have_text([TOPIC, "1", "40"])
    page.screenshot(path=tmp_path / "reset-preview.png", full_page=True)
    assert _committed(admin, "audit") == dict.fromkeys(TPS, PER_PARTITION)  # preview only

    page.click("#reset-no")
    expect(confirm).to_be_hidden()
    assert _committed(admin, "audit") == dict.fromkeys(TPS, PER_PARTITION)

    # by timestamp: the first record at or after it; past the last record, the log end
    page.select_option("#reset-target", "timestamp")
    page.fill("#reset-value", "0")
    page.click("#reset-button")
    expect(preview.nth(0).locator("td")).to_have_text([TOPIC, "0", "0"])
    page.fill("#reset-value", str(4_000_000_000_000))  # the year 2096
    page.click("#reset-button")
    expect(preview.nth(0).locator("td")).to_have_text([TOPIC, "0", str(PER_PARTITION)])
    assert _committed(admin, "audit") == dict.fromkeys(TPS, PER_PARTITION)

    page.select_option("#reset-target", "earliest")
    page.fill("#reset-value", "")
    page.click("#reset-button")
    expect(preview.nth(0).locator("td")).to_have_text([TOPIC, "0", "0"])
    page.click("#reset-yes")
    expect(page.locator("#reset-result")).to_have_text(
        "Committed 2 offset(s) for group \u201caudit\u201d."
    )
    expect(confirm).to_be_hidden()
    for partition in (0, 1):
        expect(_lag_cells(page, partition).nth(2)).to_have_text("0")
        expect(_lag_cells(page, partition).nth(4)).to_have_text(str(PER_PARTITION))
    assert _committed(admin, "audit") == dict.fromkeys(TPS, 0)
    page.screenshot(path=tmp_path / "reset-done.png", full_page=True)


def test_create_topic_through_the_confirmation(
    page: Page, page_errors: list[str], console: Console, admin: Admin, tmp_path: Path
) -> None:
    name = "created-by-console"
    page.goto(console.url + "/")
    page.fill("#create-name", name)
    page.fill("#create-partitions", "4")
    page.fill("#create-configs", "retention.ms=3600000, cleanup.policy=delete")
    page.click("#create-button")
    expect(page.locator("#create-confirm")).to_be_visible()
    expect(page.locator("#create-summary")).to_have_text(
        f"Create topic \u201c{name}\u201d with 4 partition(s) and configs "
        "retention.ms=3600000, cleanup.policy=delete?"
    )
    assert name not in admin.list_topics()  # the broker only validated it
    page.click("#create-no")
    expect(page.locator("#create-confirm")).to_be_hidden()
    assert name not in admin.list_topics()

    page.click("#create-button")
    page.click("#create-yes")
    expect(page.locator("#create-result")).to_have_text(f"Created topic \u201c{name}\u201d.")
    row = page.locator("#topics-table tbody tr", has_text=name)
    expect(row.locator("td").nth(1)).to_have_text("4")
    (described,) = admin.describe_topics([name])
    assert len(described.partitions) == 4
    assert admin.describe_configs(name)["retention.ms"].value == "3600000"
    page.screenshot(path=tmp_path / "created.png", full_page=True)

    # the same name again: the broker's error, shown before any confirmation
    page.click("#create-button")
    expect(page.locator("#error")).to_contain_text("TopicAlreadyExistsError")
    expect(page.locator("#create-confirm")).to_be_hidden()
    page_errors.remove(
        "Failed to load resource: the server responded with a status of 400 (Bad Request)"
    )
