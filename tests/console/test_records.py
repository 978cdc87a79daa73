"""How the message browser renders record bytes (odradek.console.records), without a browser:
text with invalid UTF-8 made visible, JSON pretty-printed or refused, hex dumps, cuts."""

from __future__ import annotations

from odradek.client import ConsumerRecord
from odradek.console.records import JSON_MAX_BYTES, render_bytes, render_record


def test_text_shows_invalid_utf8_as_escapes() -> None:
    shown = render_bytes(b"caf\xc3\xa9 \xff<b>", "text", 100)
    assert shown == {
        "shown": "café \\xff<b>",
        "size_bytes": 10,
        "truncated": False,
        "not_json": False,
    }


def test_null_is_not_empty() -> None:
    assert render_bytes(None, "text", 10) is None
    assert render_bytes(b"", "text", 10) == {
        "shown": "",
        "size_bytes": 0,
        "truncated": False,
        "not_json": False,
    }


def test_cut_at_shown_bytes() -> None:
    shown = render_bytes(b"x" * 5000, "text", 2048)
    assert shown is not None
    assert shown["shown"] == "x" * 2048
    assert (shown["size_bytes"], shown["truncated"]) == (5000, True)


def test_json_pretty_printed_or_marked_not_json() -> None:
    shown = render_bytes(b'{"a":[1,2],"s":"\\ud800"}', "json", 1000)
    assert shown is not None
    assert shown["shown"] == '{\n  "a": [\n    1,\n    2\n  ],\n  "s": "\\ud800"\n}'
    assert not shown["not_json"]
    broken = render_bytes(b'{"a": 1', "json", 1000)
    assert broken == {"shown": '{"a": 1', "size_bytes": 7, "truncated": False, "not_json": True}
    too_big = render_bytes(b'"' + b"a" * JSON_MAX_BYTES + b'"', "json", 10)
    assert too_big is not None and too_big["not_json"] and too_big["truncated"]


def test_hex_dump_lines() -> None:
    shown = render_bytes(bytes(range(0x41, 0x41 + 18)), "hex", 100)
    assert shown is not None
    assert shown["shown"].splitlines() == [
        "00000000  41 42 43 44 45 46 47 48 49 4a 4b 4c 4d 4e 4f 50  ABCDEFGHIJKLMNOP",
        "00000010  51 52" + " " * 42 + "  QR",
    ]
    cut = render_bytes(b"\x00" * 40, "hex", 16)
    assert cut is not None and cut["truncated"] and cut["shown"].count("\n") == 0


def test_record_fields() -> None:
    record = ConsumerRecord(
        "t", 0, 7, 1_700_000_000_000, 1, None, b"v", [("h", None), ("k", b"\x01")]
    )
    rendered = render_record(record, "text", 100)
    assert rendered["offset"] == 7
    assert rendered["timestamp_type"] == "LogAppendTime"
    assert rendered["key"] is None
    assert rendered["headers"][0] == {"name": "h", "value": None}
    assert rendered["headers"][1]["value"]["shown"] == "\x01"
