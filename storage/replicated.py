"""Small tables kept whole in every online root of ``log.dirs`` (the SCRAM credentials, the
ACLs): what Kafka keeps in its metadata log, odradek keeps in one JSON file per root::

    {"version": 7, "<key>": <the table>}

``version`` counts the writes. Every change rewrites the whole table to every online root
(:func:`write_table`); at start-up the copy with the highest version wins
(:func:`read_table`), so losing a root, or a crash between two roots' writes, loses no
change that was acknowledged: an older copy simply loses to a newer one. A copy that does
not parse is logged and ignored. Crash safety: each copy is replaced atomically
(:func:`odradek.storage.atomic.write_atomically`), so a reader sees a whole old or a whole
new table; a change is acknowledged only once every copy is written.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from odradek.storage.atomic import write_atomically

__all__ = ["read_table", "write_table"]

logger = logging.getLogger(__name__)
T = TypeVar("T")


def read_table(
    roots: Iterable[Path], file_name: str, key: str, decode: Callable[[Any], T]
) -> tuple[int, T | None]:
    """The newest copy in ``roots``: (its version, ``decode(table)``); (0, None) if none."""
    best: tuple[int, T | None] = (0, None)
    for root in roots:
        path = root / file_name
        try:
            data = json.loads(path.read_bytes())
            version, table = int(data["version"]), decode(data[key])
        except FileNotFoundError:
            continue
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            logger.error("ignoring unreadable %s: %s", path, exc)
            continue
        if version > best[0]:
            best = (version, table)
    return best


def write_table(
    roots: Iterable[Path],
    file_name: str,
    key: str,
    version: int,
    table: Any,
    *,
    mode: int | None = None,
) -> None:
    """Write ``table`` at ``version`` to every root (sorted keys: equal tables, equal bytes)."""
    data = json.dumps({"version": version, key: table}, indent=1, sort_keys=True).encode()
    for root in roots:
        write_atomically(root / file_name, data, mode=mode)
