"""Hostile data in a real Chromium: HTML and scripts in keys, values, headers and group ids,
invalid UTF-8, a 2 MiB value, a topic name that is markup. Each is shown as literal text,
cut where it is long, and never run: ``window.__pwned`` (what every payload would set) stays
undefined. The Content-Security-Policy is checked on its own too: markup injected into the
page still cannot run an inline handler. Writes from another origin are refused.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from odradek.client import Admin, NewTopic, Producer, TopicPartition
from tests.broker_process import BrokerProcess
from tests.console.conftest import Console

TOPIC = "hostile"
SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=1">'
SVG = b"\xff\xfe<svg onload=window.__pwned=1>"
BIG_VALUE = SCRIPT.encode() + b"A" * (2 << 20)
GROUP = "<img src=x onerror=window.__pwned=1>"
SHOWN_BYTES = 2048  # what the console shows of a long field
BAD_REQUEST = "Failed to load resource: the server responded with a status of 400 (Bad Request)"


@pytest.fixture(scope="module")
def hostile(broker: BrokerProcess) -> Iterator[str]:
    with Admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1)])
        with Producer(broker.bootstrap, acks="all", max_request_size=4 << 20) as producer:
            producer.send(TOPIC, IMG.encode(), key=SCRIPT.encode(), headers=[(SCRIPT, SVG)])
            producer.send(TOPIC, b"bad \xc3\x28 utf8 <i>x</i>", key=b"\xff\xfe\xfd")
            producer.send(TOPIC, BIG_VALUE, key=b"big")
            producer.send(TOPIC, json.dumps({"html": SCRIPT, "img": IMG}).encode(), key=b"json")
            producer.flush()
        admin.alter_group_offsets(GROUP, {TopicPartition(TOPIC, 0): 1})
    yield TOPIC


def _not_pwned(page: Page) -> None:
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("script").count() == 2  # common.js and the page's own
    assert page.locator("main img, main svg, main i, main b").count() == 0


def test_keys_values_headers_are_text(
    page: Page, console: Console, hostile: str, tmp_path: Path
) -> None:
    response = page.goto(f"{console.url}/messages?topic={TOPIC}&partition=0")
    assert response is not None
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    rows = page.locator("#messages-table tbody tr")
    expect(rows).to_have_count(4)
    first = rows.nth(0).locator("td")
    expect(first.nth(2).locator("pre")).to_have_text(SCRIPT)
    expect(first.nth(3).locator("pre")).to_have_text(IMG)
    expect(first.nth(4)).to_have_text(SCRIPT + ": " + "\\xff\\xfe<svg onload=window.__pwned=1>")
    second = rows.nth(1).locator("td")
    expect(second.nth(2).locator("pre")).to_have_text("\\xff\\xfe\\xfd")
    expect(second.nth(3).locator("pre")).to_have_text("bad \\xc3( utf8 <i>x</i>")

    big = rows.nth(2).locator("td").nth(3)
    shown = big.locator("pre").text_content() or ""
    assert shown == (SCRIPT + "A" * SHOWN_BYTES)[:SHOWN_BYTES]
    expect(big.locator(".truncated")).to_have_text(f"truncated: {len(BIG_VALUE):,} bytes in all")
    expect(big).to_be_visible()
    _not_pwned(page)
    page.screenshot(path=tmp_path / "hostile-text.png", full_page=True)

    for value_format in ("json", "hex"):
        page.select_option("#browse-format", value_format)
        page.click("#browse-button")
        expect(page.locator("#range")).to_contain_text(f"as {value_format}.")
        _not_pwned(page)
    json_value = rows.nth(3).locator("td").nth(3).locator("pre")
    page.select_option("#browse-format", "json")
    page.click("#browse-button")
    expect(json_value).to_have_text(json.dumps({"html": SCRIPT, "img": IMG}, indent=2))
    _not_pwned(page)
    page.screenshot(path=tmp_path / "hostile-json.png", full_page=True)


def test_hostile_group_id_is_text(
    page: Page, console: Console, hostile: str, tmp_path: Path
) -> None:
    page.goto(console.url + "/groups")
    link = page.locator("#groups-table tbody tr td a", has_text="onerror")
    expect(link).to_have_text(GROUP)
    link.click()
    expect(page.locator("#title")).to_have_text(f"Consumer group {GROUP}")
    expect(page.locator("#lag-table tbody tr td").nth(4)).to_have_text("3")  # 4 records, at 1
    _not_pwned(page)
    page.screenshot(path=tmp_path / "hostile-group.png", full_page=True)


def test_a_markup_topic_name_is_refused_as_text(
    page: Page, page_errors: list[str], console: Console, hostile: str
) -> None:
    page.goto(console.url + "/")
    page.fill("#create-name", SCRIPT)
    page.click("#create-button")
    expect(page.locator("#error")).to_contain_text("InvalidTopicError")
    expect(page.locator("#create-confirm")).to_be_hidden()
    page_errors.remove(BAD_REQUEST)
    # an unknown topic named with markup, straight in the URL: the error is text too
    page.goto(f"{console.url}/topic?name=" + urllib.request.quote(IMG))
    expect(page.locator("#error")).to_be_visible()
    page_errors.remove(BAD_REQUEST)
    _not_pwned(page)


def test_the_policy_blocks_injected_markup(
    page: Page, page_errors: list[str], console: Console
) -> None:
    # as if an escaping mistake let markup in: the CSP still refuses the inline handler
    page.goto(console.url + "/")
    with page.expect_console_message(lambda msg: "Content Security Policy" in msg.text) as blocked:
        page.evaluate(
            """() => document.querySelector("main").insertAdjacentHTML(
                "beforeend", '<img src="/static/favicon.svg" onload="window.__pwned=1">')"""
        )
    assert "inline event handler" in blocked.value.text
    expect(page.locator("main img")).to_have_count(1)
    assert page.evaluate("() => window.__pwned") is None
    page_errors.remove(blocked.value.text)


def test_writes_from_another_origin_are_refused(console: Console) -> None:
    body = json.dumps({"name": "from-elsewhere", "partitions": 1, "execute": True}).encode()
    for headers, reason in (
        ({"Content-Type": "application/json", "Origin": "http://evil.example"}, "cross-origin"),
        # what a cross-site form can send without a CORS preflight
        ({"Content-Type": "text/plain"}, "Content-Type: application/json"),
    ):
        request = urllib.request.Request(
            console.url + "/api/topics", data=body, headers=headers, method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 400
        assert reason in json.load(refused.value)["error"]
    with Admin(console.bootstrap) as admin:
        assert "from-elsewhere" not in admin.list_topics()


def test_a_foreign_host_name_is_refused(console: Console) -> None:
    # DNS rebinding: a page at evil.example whose name resolves to 127.0.0.1
    request = urllib.request.Request(console.url + "/api/topics", headers={"Host": "evil.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 400
    assert json.load(refused.value)["error"] == "host 'evil.example' refused"
    port = console.url.rpartition(":")[2]
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
        request = urllib.request.Request(console.url + "/api/topics", headers={"Host": host})
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 200
            assert "topics" in json.load(answer)


def test_malformed_writes_are_bad_requests(console: Console) -> None:
    cases = [
        ("topics", b"{not json", "bad request: Expecting property name"),
        ("topics", b"[1, 2]", "bad request: the body must be a JSON object"),
        ("topics", b'{"name": 5, "partitions": 1}', "bad request: 'name' must be a str"),
        ("topics", b'{"name": "x", "partitions": true}', "bad request: 'partitions' must be a int"),
        (
            "topics",
            b'{"name": "x", "partitions": 1, "configs": [1]}',
            "bad request: configs must map",
        ),
        ("group/reset", b"{}", "bad request: 'group_id' must be a str"),
        (
            "group/reset",
            b'{"group_id": "g", "topic": "t", "target": "sideways"}',
            "bad request: reset target must be one of earliest, latest, offset, timestamp",
        ),
    ]
    for path, body, error in cases:
        request = urllib.request.Request(
            f"{console.url}/api/{path}",
            data=body,
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 400, body
        assert json.load(refused.value)["error"].startswith(error), body
