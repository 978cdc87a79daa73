"""Build ``odradek/spark/jars/odradek-spark.jar``: the ``odradek-jvm`` and ``odradek-files`` Spark
data sources (JVM; sources under ``src/odradek/``: ``broker/`` and ``files/`` the two readers,
``source/`` their shared options, offset planning and DataSource V2 table and scan, ``records/``
their shared decoding).

Run by ``make install`` and by ``setup.py``'s ``build_py`` (so a ``pip install`` of the sdist
builds it where it can)::

    python odradek/spark/jvm/build_jar.py [--if-stale]

Steps:

1. Find ``javac`` (``$JAVA_HOME/bin/javac``, else ``PATH``) and Spark's jars to compile against
   (``$SPARK_HOME/jars``, else the installed ``pyspark`` package's ``jars/``: ``find_spec``,
   no import). Without either, say so and build nothing (exit 0): the jar is optional, as the
   compiled C helpers are, and an sdist already carries a built jar.
2. ``javac --release 17`` the sources under ``src/`` into a temporary directory.
3. Write the jar with :mod:`zipfile`: the classes, ``resources/`` (the ``DataSourceRegister``
   service file that maps the short names ``odradek-jvm`` and ``odradek-files`` to their
   classes) and a manifest; every entry dated 1980-01-01, so the same sources give the same
   bytes. It is written to ``*.tmp`` and renamed into place.

``--if-stale``: do nothing when the jar is newer than every source file. ``--require``: exit 1
when the jar cannot be built (``make install``; ``setup.py`` does without).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src"
RESOURCES = HERE / "resources"
JAR = HERE.parent / "jars" / "odradek-spark.jar"
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").exists():
        return str(Path(home) / "bin" / "javac")
    return shutil.which("javac")


def _spark_jars() -> Path | None:
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "jars").is_dir():
        return Path(home) / "jars"
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    return jars if jars.is_dir() else None


def _inputs() -> list[Path]:
    return sorted(p for d in (SOURCES, RESOURCES) for p in d.rglob("*") if p.is_file())


def stale() -> bool:
    if not JAR.exists():
        return True
    built = JAR.stat().st_mtime
    return any(p.stat().st_mtime > built for p in [*_inputs(), Path(__file__)])


def build() -> bool:
    """Build the jar; False (with a message on stderr) when javac or Spark's jars are missing."""
    javac, jars = _javac(), _spark_jars()
    if javac is None or jars is None:
        missing = "javac (a JDK 17)" if javac is None else "Spark's jars (pyspark or SPARK_HOME)"
        print(f"odradek-spark.jar not built: {missing} not found", file=sys.stderr)
        return False
    with tempfile.TemporaryDirectory(prefix="odradek-jar-") as tmp:
        classes = Path(tmp) / "classes"
        sources = [str(p) for p in sorted(SOURCES.rglob("*.java"))]
        command = [javac, "--release", "17", "-Xlint:all,-path", "-Werror", "-nowarn"]
        command += ["-encoding", "UTF-8", "-d", str(classes), "-cp", f"{jars}/*", *sources]
        subprocess.run(command, check=True)
        JAR.parent.mkdir(parents=True, exist_ok=True)
        partial = JAR.with_suffix(".jar.tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            _add(
                jar, "META-INF/MANIFEST.MF", b"Manifest-Version: 1.0\r\nCreated-By: odradek\r\n\r\n"
            )
            for root in (classes, RESOURCES):
                for path in sorted(p for p in root.rglob("*") if p.is_file()):
                    _add(jar, path.relative_to(root).as_posix(), path.read_bytes())
        os.replace(partial, JAR)
    return True


def _add(jar: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, _EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    jar.writestr(info, data)


def main(argv: list[str]) -> int:
    if "--if-stale" in argv and not stale():
        return 0
    built = build()
    return 1 if "--require" in argv and not built else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
