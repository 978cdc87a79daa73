"""The client's optional compiled helpers, and the switch that turns them off.

The producer's record buffer (``odradek.client._record_buffer``) and the consumer's record decoder
(``odradek.client._record_decoder``) each have a C implementation, built by ``pip install`` from
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
    """The compiled module ``odradek.client.<name>``, or ``None`` (not built, or disabled).

    Only a module that is not there reads as "not built": a built one that fails to
    initialise raises, so a broken build is never silently replaced by the slow path.
    """
    if DISABLED:
        return None
    qualified = f"odradek.client.{name}"
    try:
        return importlib.import_module(qualified)
    except ModuleNotFoundError as exc:
        if exc.name == qualified:
            return None
        raise
