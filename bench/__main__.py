"""Run the benchmarks: ``python -m bench [--quick] [--only NAME] [--set KEY=VALUE]``.

Every module named in :data:`BENCHMARKS` is imported as ``bench.<name>`` and run (the module
contract is in :mod:`bench.common`). Results go to ``bench/results/<name>-<stamp>.json`` and
``bench/results/latest.json`` (the whole run); one table per benchmark is printed.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import importlib
import shutil
import sys
import tempfile
import time
import traceback
from datetime import datetime
from pathlib import Path

from rich.console import Console

from bench.common import (
    BenchResult,
    apply_overrides,
    machine_info,
    markdown_table,
    print_result,
    write_results,
)

# The registry: add a module here (bench/<name>.py) and `python -m bench` runs it.
BENCHMARKS = [
    "storage",
    "fetch",
    "cleaner",
    "e2e",
    "peers",
    "soak",
    "spark",
    "spark_files",
    "groups",
    "startup",
    "client_size",
    "growth",
    "kafka",
    "metrics",
    "durability",
    "security",
]

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (about 20 s in all)")
    parser.add_argument(
        "--only", action="append", metavar="NAME", help=f"run only NAME (of {BENCHMARKS})"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a parameter, e.g. --set log_bytes=4G (with --only: of that benchmark)",
    )
    parser.add_argument(
        "--scratch", type=Path, help="where the temporary data goes (default: $TMPDIR or /tmp)"
    )
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="JSON output directory")
    parser.add_argument("--markdown", action="store_true", help="also print markdown tables")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile each benchmark to <results>/<name>.prof"
    )
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    return parser.parse_args(argv)


def _overrides(pairs: list[str]) -> dict[str, str]:
    result = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set {pair!r}: expected KEY=VALUE")
        result[key.strip()] = value.strip()
    return result


def _run_one(name: str, args: argparse.Namespace, console: Console) -> BenchResult:
    module = importlib.import_module(f"bench.{name}")
    params = module.Params.quick() if args.quick else module.Params()
    try:
        params = apply_overrides(params, _overrides(args.set))
    except ValueError as exc:
        raise SystemExit(f"--set: {exc}") from None
    started = datetime.now().astimezone()
    machine = machine_info()
    scratch = Path(tempfile.mkdtemp(prefix=f"odradek-bench-{name}-", dir=args.scratch))
    console.rule(f"[bold]{name}[/bold]: {module.TITLE}")

    def say(message: str) -> None:
        console.log(message)

    error = None
    figures = []
    t0 = time.perf_counter()
    profiler = cProfile.Profile() if args.profile else None
    try:
        if profiler is not None:
            profiler.enable()
        figures = module.run(params, scratch, say)
    except Exception:
        error = traceback.format_exc()
        console.print(error, markup=False, highlight=False)
    finally:
        if profiler is not None:
            profiler.disable()
            args.results.mkdir(parents=True, exist_ok=True)
            path = args.results / f"{name}.prof"
            profiler.dump_stats(path)
            say(f"profile written to {path} (python -m pstats {path})")
        shutil.rmtree(scratch, ignore_errors=True)
    return BenchResult(
        name=name,
        title=module.TITLE,
        started_at=started.isoformat(timespec="seconds"),
        duration_s=time.perf_counter() - t0,
        quick=args.quick,
        params=dataclasses.asdict(params),
        machine=machine,
        figures=figures,
        error=error,
    )


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.list:
        print("\n".join(BENCHMARKS))
        return 0
    names = BENCHMARKS
    if args.only:
        wanted = [n for item in args.only for n in item.split(",") if n]
        unknown = [n for n in wanted if n not in BENCHMARKS]
        if unknown:
            raise SystemExit(f"unknown benchmark {', '.join(unknown)} (known: {BENCHMARKS})")
        names = wanted
    if args.set and len(names) > 1:
        raise SystemExit("--set applies to one benchmark: add --only NAME")
    console = Console()
    if not console.is_terminal:  # piped or redirected: rich would assume 80 columns
        console = Console(width=132)
    stamp = datetime.now().strftime("%Y%m%dT%H%M%S")
    results = [_run_one(name, args, console) for name in names]
    for result in results:
        print_result(result, console)
        if args.markdown:
            console.print(markdown_table(result), markup=False, highlight=False, soft_wrap=True)
    for path in write_results(results, args.results, stamp):
        console.print(f"wrote {path}", highlight=False)
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
