"""``odradek.broker``: the async TCP server: connections, produce and fetch, admin, the group
coordinator.

The folder sits at the repository root and is installed as ``odradek.broker`` (``package-dir``
in pyproject.toml; docs/architecture.md §1). Loaded under its bare folder name, as a stray
``import broker`` from the repository root would, it would be a second copy of every module, with
exception classes that do not match the real ones: that import fails here, at once.
"""

if __name__ != "odradek.broker":
    raise ImportError(f"import odradek.broker, not {__name__!r} (see pyproject.toml package-dir)")
