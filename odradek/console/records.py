"""How the message browser shows a record's key, value and headers: text, JSON or hex.

Any bytes may be in a record, so every field is shown as data, never as markup:

1. **Text**: UTF-8 with each invalid byte written ``\\xNN`` (``backslashreplace``), so
   invalid UTF-8 is visible rather than silently replaced.
2. **JSON**: parsed and pretty-printed (2-space indent) when the whole field is valid JSON
   of at most :data:`JSON_MAX_BYTES`; otherwise shown as text with ``not_json`` set.
3. **Hex**: 16 bytes a line, ``offset  hex bytes  printable ASCII``.

Each rendering is cut to ``shown_bytes`` source bytes (text, hex) or as many characters
(JSON); ``size_bytes`` and ``truncated`` say what was left out. A null key or value is
``None`` (not the empty string). The result is plain JSON for the page, which puts it into
the DOM with ``textContent``: escaping is the browser's, not this module's.
"""

from __future__ import annotations

import json
from typing import Any

from odradek.client import ConsumerRecord

FORMATS = ("text", "json", "hex")
JSON_MAX_BYTES = 1 << 20  # larger values are not parsed: shown as text


def render_bytes(data: bytes | None, value_format: str, shown_bytes: int) -> dict[str, Any] | None:
    """One field as ``{"shown", "size_bytes", "truncated", "not_json"}``; ``None`` if null."""
    if data is None:
        return None
    data = bytes(data)
    size_bytes = len(data)
    not_json = False
    if value_format == "json":
        pretty = _pretty_json(data)
        if pretty is not None:
            return {
                "shown": pretty[:shown_bytes],
                "size_bytes": size_bytes,
                "truncated": len(pretty) > shown_bytes,
                "not_json": False,
            }
        not_json = True
    head = data[:shown_bytes]
    shown = _hex_dump(head) if value_format == "hex" else _text(head)
    return {
        "shown": shown,
        "size_bytes": size_bytes,
        "truncated": size_bytes > shown_bytes,
        "not_json": not_json,
    }


def render_record(record: ConsumerRecord, value_format: str, shown_bytes: int) -> dict[str, Any]:
    """A fetched record for the page: offset, timestamp (ms), key, value and headers."""
    return {
        "offset": record.offset,
        "timestamp_ms": record.timestamp,
        "timestamp_type": "LogAppendTime" if record.timestamp_type == 1 else "CreateTime",
        "key": render_bytes(record.key, value_format, shown_bytes),
        "value": render_bytes(record.value, value_format, shown_bytes),
        "headers": [
            {
                "name": _text(_header_name_bytes(name))[:shown_bytes],
                "value": render_bytes(value, value_format, shown_bytes),
            }
            for name, value in record.headers
        ],
    }


def _header_name_bytes(name: str) -> bytes:
    try:
        return name.encode("utf-8", "surrogateescape")  # undo a lenient decode
    except UnicodeEncodeError:
        return name.encode("utf-8", "backslashreplace")


def _text(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")


def _pretty_json(data: bytes) -> str | None:
    if len(data) > JSON_MAX_BYTES:
        return None
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    pretty = json.dumps(parsed, indent=2, ensure_ascii=False)
    # a lone surrogate ("\\ud800" in the JSON) cannot be sent as UTF-8: show it escaped
    return pretty.encode("utf-8", "backslashreplace").decode("utf-8")


def _hex_dump(data: bytes) -> str:
    lines = []
    for start in range(0, len(data), 16):
        chunk = data[start : start + 16]
        ascii_text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
        lines.append(f"{start:08x}  {chunk.hex(' '):<47}  {ascii_text}")
    return "\n".join(lines)
