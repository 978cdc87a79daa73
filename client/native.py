"""The client's optional compiled helpers, and the switch that turns them off.

The producer's record buffer (``client._record_buffer``) and the consumer's record decoder
(``client._record_decoder``) each have a C implementation, built by ``pip install`` from
this repository when a C compiler is present (``ext-modules`` in ``pyproject.toml``,
``optional``: an install without a compiler still works), and a pure-Python one with the
same behaviour, which the test suite runs side by side with the C one.

``load(name)`` returns the compiled module, or ``None`` when it was not built or when the
environment sets ``NO_ODRADEK_EXTENSIONS`` to a non-empty value (the way to run everything on
the pure-Python paths, e.g. to compare them). The variable is read once, at import.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["DISABLED", "load"]

DISABLED = bool(os.environ.get("NO_ODRADEK_EXTENSIONS"))


def load(name: str) -> ModuleType | None:
    """The compiled module ``client.<name>``, or ``None`` (not built, or disabled)."""
    if DISABLED:
        return None
    try:
        return importlib.import_module(f"client.{name}")
    except ImportError:
        return None
