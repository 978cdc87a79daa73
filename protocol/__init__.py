"""``odradek.protocol``: sans-I/O wire messages, framing, the Kafka record-batch codec, compression,
error codes.

The folder sits at the repository root and is installed as ``odradek.protocol`` (``package-dir``
in pyproject.toml; docs/architecture.md §1). Loaded under its bare folder name, as a stray
``import protocol`` from the repository root would, it would be a second copy of every module, with
exception classes that do not match the real ones: that import fails here, at once.
"""

if __name__ != "odradek.protocol":
    raise ImportError(f"import odradek.protocol, not {__name__!r} (see pyproject.toml package-dir)")
