"""docs/architecture.md §2: the import graph runs one way, and each layer keeps its I/O rules.

    protocol  <-  storage  <-  broker            nothing imports broker (but the CLI)
    protocol  <-  client   <-  spark   <-  pipelines
    protocol  <-  client   <-  console (the web UI)

All of them are ``odradek.<layer>``. ``odradek.cli`` is the composition root behind the
``odradek`` command: it may import every layer but the Spark ones, and nothing imports it.
``odradek/__init__.py`` re-exports the client (lazily) and is no layer of its own.

docs/architecture.md §1: one import namespace. protocol/, storage/ and broker/ sit at the repository
root (installed as ``odradek.*`` by ``package-dir``); nothing anywhere — code, tests, benchmarks —
imports them, or any other layer, by a bare name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Each layer's folder in the repository (pyproject.toml's package-dir says the same).
LAYER_DIRS = {
    "protocol": ROOT / "protocol",
    "storage": ROOT / "storage",
    "broker": ROOT / "broker",
    "client": ROOT / "odradek" / "client",
    "spark": ROOT / "odradek" / "spark",
    "pipelines": ROOT / "odradek" / "pipelines",
    "cli": ROOT / "odradek" / "cli",
    "console": ROOT / "odradek" / "console",
}
LAYERS = set(LAYER_DIRS)

# Which layers each layer may import.
ALLOWED = {
    "protocol": set(),
    "storage": {"protocol"},
    "broker": {"protocol", "storage"},
    "client": {"protocol"},
    "spark": {"protocol", "client"},
    "pipelines": {"protocol", "client", "spark"},
    "console": {"protocol", "client"},
    "cli": LAYERS - {"cli", "pipelines", "spark"},
}

# Standard-library and third-party modules a layer must not touch.
FORBIDDEN_MODULES = {
    # sans-I/O: no sockets, event loops, files or clocks
    "protocol": {"socket", "asyncio", "anyio", "trio", "uvloop", "selectors", "mmap", "time"},
    # synchronous, single-writer: the broker alone owns concurrency and sockets
    "storage": {"socket", "asyncio", "anyio", "trio", "uvloop", "selectors", "threading"},
}

# Top-level names that must never be imported: the old, bare package names.
BARE_NAMES = {"protocol", "storage", "broker", "client", "cli", "pipelines", "pyspark_odradek"}


def _modules(directory: Path) -> list[Path]:
    return sorted(directory.rglob("*.py"))


def _imports(path: Path) -> tuple[set[str], bool]:
    """Absolute module names imported by ``path`` and whether it defines any ``async def``.

    ``from odradek import client`` counts as importing ``odradek.client``.
    """
    return _imports_of(ast.parse(path.read_text(), filename=str(path)))


def _code_in_strings(tree: ast.AST) -> list[ast.AST]:
    """String constants that are Python code with an import (``python -c`` programs)."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "import" in node.value
        ):
            try:
                found.append(ast.parse(node.value))
            except SyntaxError:
                continue  # prose
    return found


def _imports_of(tree: ast.AST) -> tuple[set[str], bool]:
    names: set[str] = set()
    has_async = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            if node.module == "odradek":
                names.update(f"odradek.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.AsyncFunctionDef | ast.AsyncWith | ast.AsyncFor):
            has_async = True
    return names, has_async


def _layers_of(imported: set[str]) -> set[str]:
    parts = (name.split(".") for name in imported)
    return {p[1] for p in parts if len(p) > 1 and p[0] == "odradek" and p[1] in LAYERS}


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_imports_follow_the_layering(layer: str) -> None:
    modules = _modules(LAYER_DIRS[layer])
    assert modules, f"no modules found for {layer} in {LAYER_DIRS[layer]}"
    for path in modules:
        imported, _ = _imports(path)
        illegal = _layers_of(imported) - {layer} - ALLOWED[layer]
        assert not illegal, f"{path.relative_to(ROOT)} imports {sorted(illegal)}"
        top_level = {name.split(".")[0] for name in imported}
        banned = top_level & FORBIDDEN_MODULES.get(layer, set())
        assert not banned, f"{path.relative_to(ROOT)} imports {sorted(banned)}"


def test_storage_has_no_async_code() -> None:
    for path in _modules(LAYER_DIRS["storage"]):
        _, has_async = _imports(path)
        assert not has_async, f"{path.relative_to(ROOT)} uses async code"


def test_nothing_imports_a_bare_package_name() -> None:
    checked = 0
    for folder in ("protocol", "storage", "broker", "odradek", "tests", "bench"):
        for path in _modules(ROOT / folder):
            if path == Path(__file__).resolve():
                continue  # its examples of violations below (ruff checks its real imports)
            imported, _ = _imports(path)
            tree = ast.parse(path.read_text(), filename=str(path))
            for program in _code_in_strings(tree):
                imported |= _imports_of(program)[0]
            bare = {name for name in imported if name.split(".")[0] in BARE_NAMES}
            assert not bare, f"{path.relative_to(ROOT)} imports {sorted(bare)}: use odradek.*"
            checked += 1
    assert checked > 200, f"only {checked} modules checked"


def test_a_bare_import_of_a_root_folder_fails() -> None:
    # From the repository root (on sys.path under pytest) the folders are importable by their
    # bare names; each refuses, so a stray import cannot load a second copy of the layer.
    for name in ("protocol", "storage", "broker"):
        with pytest.raises(ImportError, match=f"import odradek.{name}"):
            __import__(name)


def test_the_checker_catches_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import anyio\nfrom odradek.broker.server import Server\nfrom odradek import client\n"
        "import storage.log\nasync def f():\n    pass\n"
    )
    names, has_async = _imports(bad)
    assert {"anyio", "odradek.broker.server", "odradek.client", "storage.log"} <= names
    assert _layers_of(names) == {"broker", "client"}
    assert has_async
    program = ast.parse('run(["python", "-c", "import sys; from cli.main import main"])')
    assert _imports_of(_code_in_strings(program)[0])[0] == {"sys", "cli.main"}
