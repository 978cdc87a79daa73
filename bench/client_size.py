"""The client package's size, now and at a baseline commit: what issue 18 asks to report.

For every ``odradek/client/*.py`` file, in the working tree and at ``baseline_rev`` (read with
``git show``, nothing checked out), each line is counted once, as the first of these it is:

1. *docstring*: inside the docstring of a module, class or function (found with :mod:`ast`);
2. *code*: holding a token of Python code (found with :mod:`tokenize`);
3. *comment*: holding only a comment;
4. *blank*.

``raw`` is every line (what ``wc -l`` counts). The C sources (``*.c``) are counted raw. The
figures name the baseline's as their baselines, so the ratio is ``now / baseline``. Nothing is
timed: the counts are exact, and one pass is enough.

Like for like: the client gained features after the baseline. The modules that hold nothing
but such a feature (:data:`LATER_FEATURE_MODULES`) are also left out of one more pair of
figures, the code and raw lines of the rest. The features that grew inside older modules (admin
calls, the columnar ``extend``, bug fixes) stay counted there, so that ratio is an upper bound.
"""

from __future__ import annotations

import ast
import io
import subprocess
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import Figure, Figures
from tests.broker_process import REPO

__all__ = ["TITLE", "Params", "count_lines", "run"]

TITLE = "odradek/client/ lines by kind, working tree vs baseline_rev"

Say = Callable[[str], None]
KINDS = ("raw", "code", "docstring", "comment", "blank")
PACKAGE = "odradek/client/"
#: modules added after 7d68a8c (the default baseline_rev) for a feature the client lacked then
LATER_FEATURE_MODULES = {
    "security.py": "TLS and SASL (the security issue)",
    "tls_channel.py": "TLS and SASL (the security issue)",
    "column_send.py": "the Spark sink's columnar send",
    "offset_reset.py": "the offset-reset planner of the CLI and the console",
}


@dataclass(frozen=True)
class Params:
    baseline_rev: str = "7d68a8c"  # the commit before issue 18's work on the client

    @classmethod
    def quick(cls) -> Params:
        return cls()


def count_lines(source: str) -> dict[str, int]:
    """``source``'s lines by kind (see the module docstring); the kinds add up to ``raw``."""
    docstring: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and ast.get_docstring(node, clean=False) is not None:
                docstring.update(range(first.lineno, (first.end_lineno or 0) + 1))
    code: set[int] = set()
    comment: set[int] = set()
    layout = (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comment.add(token.start[0])
        elif token.type not in layout:
            code.update(range(token.start[0], token.end[0] + 1))
    lines = source.splitlines()
    code -= docstring
    comment -= docstring | code
    counts = {"raw": len(lines), "code": len(code), "docstring": len(docstring)}
    counts["comment"] = len(comment)
    counts["blank"] = counts["raw"] - len(code | docstring | comment)
    return counts


def _sources(rev: str | None) -> dict[str, str]:
    """The package's ``*.py`` and ``*.c`` files: path -> text, at ``rev`` (``None``: the
    working tree)."""
    if rev is None:
        root = REPO / PACKAGE
        return {
            PACKAGE + path.name: path.read_text()
            for path in sorted(root.iterdir())
            if path.suffix in (".py", ".c")
        }

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO, check=True, capture_output=True, text=True
        ).stdout

    names = git("ls-tree", "--name-only", f"{rev}:{PACKAGE}").split()
    return {
        PACKAGE + name: git("show", f"{rev}:{PACKAGE}{name}")
        for name in names
        if Path(name).suffix in (".py", ".c")
    }


def _totals(sources: dict[str, str]) -> tuple[dict[str, int], list[str]]:
    """Lines by kind (``modules``: Python files; ``C``: raw lines of ``*.c``; ``earlier
    code``/``earlier raw``: code and raw lines outside :data:`LATER_FEATURE_MODULES`), and
    the Python modules over 400 lines."""
    totals = dict.fromkeys((*KINDS, "modules", "C", "earlier code", "earlier raw"), 0)
    large = []
    for path, text in sources.items():
        if path.endswith(".c"):
            totals["C"] += len(text.splitlines())
            continue
        totals["modules"] += 1
        counts = count_lines(text)
        for kind in KINDS:
            totals[kind] += counts[kind]
        if Path(path).name not in LATER_FEATURE_MODULES:
            totals["earlier code"] += counts["code"]
            totals["earlier raw"] += counts["raw"]
        if counts["raw"] > 400:
            large.append(f"{Path(path).name} ({counts['raw']})")
    return totals, large


def run(params: Params, scratch: Path, say: Say) -> list[Figure]:
    say(f"counting {PACKAGE} at {params.baseline_rev} and in the working tree")
    before, large_before = _totals(_sources(params.baseline_rev))
    now, large_now = _totals(_sources(None))
    figures = Figures()
    label = params.baseline_rev
    for kind in (*KINDS, "earlier code", "earlier raw", "C", "modules"):
        name = {
            "C": "C lines",
            "modules": "Python modules",
            "earlier code": "Python code lines, without later features' modules",
            "earlier raw": "Python raw lines, without later features' modules",
        }.get(kind, f"Python {kind} lines")
        unit = "files" if kind == "modules" else "lines"
        figures.add(f"{label}: {name}", before[kind], unit, is_baseline=True)
        figures.add(name, now[kind], unit, baseline=f"{label}: {name}")
    figures.items[-1].note = "over 400 lines: " + (", ".join(large_now) or "none")
    figures.items[-2].note = "over 400 lines: " + (", ".join(large_before) or "none")
    return figures.items
