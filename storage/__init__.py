"""``odradek.storage``: the log engine in Apache Kafka's on-disk format (synchronous,
single-writer).

The folder sits at the repository root and is installed as ``odradek.storage`` (``package-dir``
in pyproject.toml; docs/architecture.md §1). Loaded under its bare folder name, as a stray
``import storage`` from the repository root would, it would be a second copy of every module, with
exception classes that do not match the real ones: that import fails here, at once.
"""

if __name__ != "odradek.storage":
    raise ImportError(f"import odradek.storage, not {__name__!r} (see pyproject.toml package-dir)")
