"""The client's optional compiled helpers: the producer's record buffer
(``odradek.client._record_buffer``) and the consumer's record decoder
(``odradek.client._record_decoder``), each with a pure-Python twin. Loaded, and switched off
by ``NO_ODRADEK_EXTENSIONS``, by the one loader, :mod:`odradek.protocol.native`.
"""

from __future__ import annotations

from types import ModuleType

from odradek.protocol import native

__all__ = ["DISABLED", "load"]

DISABLED = native.DISABLED


def load(name: str) -> ModuleType | None:
    """The compiled module ``odradek.client.<name>``, or ``None`` (not built, or disabled)."""
    return native.load(f"odradek.client.{name}")
