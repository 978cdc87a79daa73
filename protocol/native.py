"""odradek's optional compiled helpers, and the switch that turns them off: the one loader.

Each helper is a C extension with a pure-Python twin of the same behaviour, which the test
suite runs side by side with it: the broker's record walk (``odradek.protocol._validate``,
twin :func:`odradek.protocol.validate.walk_records`), the producer's record buffer and the
consumer's record decoder (``odradek.client._record_buffer`` and ``_record_decoder``, twins
:mod:`odradek.client.record_buffer` and :mod:`odradek.client.record_decoder`). ``pip install``
builds them from this repository when a C compiler is present (``ext-modules`` in
``pyproject.toml``, ``optional``: an install without a compiler still works, on the
pure-Python paths).

``load(qualified_name)`` returns the compiled module, or ``None`` when it was not built or when
the environment sets ``NO_ODRADEK_EXTENSIONS`` to a non-empty value (the way to run everything
on the pure-Python paths, e.g. to compare them). The variable is read once, at import.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["DISABLED", "load"]

DISABLED = bool(os.environ.get("NO_ODRADEK_EXTENSIONS"))


def load(qualified_name: str) -> ModuleType | None:
    """The compiled module ``qualified_name`` (e.g. ``"odradek.protocol._validate"``), or
    ``None`` (not built, or disabled).

    Only a module that is not there reads as "not built": a built one that fails to
    initialise raises, so a broken build is never silently replaced by the slow path.
    """
    if DISABLED:
        return None
    try:
        return importlib.import_module(qualified_name)
    except ModuleNotFoundError as exc:
        if exc.name == qualified_name:
            return None
        raise
