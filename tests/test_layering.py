"""DESIGN §2: the import graph runs one way, and each layer keeps its I/O rules.

    protocol  <-  storage  <-  broker            nothing imports broker (but the CLI)
    protocol  <-  client   <-  pyspark_odradek   <-  pipelines

``cli`` is the composition root behind the ``odradek`` command: it may import every layer,
and nothing imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = {"protocol", "storage", "broker", "client", "pyspark_odradek", "pipelines", "cli"}

# Which project packages each package may import.
ALLOWED = {
    "protocol": set(),
    "storage": {"protocol"},
    "broker": {"protocol", "storage"},
    "client": {"protocol"},
    "pyspark_odradek": {"protocol", "client"},
    "pipelines": {"protocol", "client", "pyspark_odradek"},
    "cli": PROJECT - {"cli", "pipelines", "pyspark_odradek"},
}

# Standard-library and third-party modules a layer must not touch.
FORBIDDEN_MODULES = {
    # sans-I/O: no sockets, event loops, files or clocks
    "protocol": {"socket", "asyncio", "anyio", "trio", "uvloop", "selectors", "mmap", "time"},
    # synchronous, single-writer: the broker alone owns concurrency and sockets
    "storage": {"socket", "asyncio", "anyio", "trio", "uvloop", "selectors", "threading"},
}


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _imports(path: Path) -> tuple[set[str], bool]:
    """Top-level names imported by ``path`` and whether it defines any ``async def``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    has_async = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.AsyncFunctionDef | ast.AsyncWith | ast.AsyncFor):
            has_async = True
    return names, has_async


PACKAGES = [p for p in ALLOWED if (ROOT / p).is_dir()]


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_follow_the_layering(package: str) -> None:
    for path in _modules(package):
        imported, _ = _imports(path)
        project_imports = (imported & PROJECT) - {package}
        illegal = project_imports - ALLOWED[package]
        assert not illegal, f"{path.relative_to(ROOT)} imports {sorted(illegal)}"
        banned = imported & FORBIDDEN_MODULES.get(package, set())
        assert not banned, f"{path.relative_to(ROOT)} imports {sorted(banned)}"


def test_storage_has_no_async_code() -> None:
    for path in _modules("storage"):
        _, has_async = _imports(path)
        assert not has_async, f"{path.relative_to(ROOT)} uses async code"


def test_the_rules_see_the_packages() -> None:
    # A layering test that finds no code would pass vacuously.
    assert {"protocol", "storage"} <= set(PACKAGES)
    assert _modules("protocol"), "no protocol modules found"


def test_the_checker_catches_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import anyio\nfrom broker.server import Server\nasync def f():\n    pass\n")
    names, has_async = _imports(bad)
    assert {"anyio", "broker"} <= names
    assert has_async
