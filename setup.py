"""What pyproject.toml cannot say: build the JVM reader's jar before the package data is copied.

``build_py`` first runs ``odradek/spark/jvm/build_jar.py --if-stale``, which compiles the Java
sources with ``javac`` against Spark's jars when both are found (``pip install`` in an
environment that has pyspark, or ``SPARK_HOME``), and otherwise leaves things as they are: an
sdist from ``make dist`` already carries a built ``odradek/spark/jars/odradek-spark.jar``. Like
the compiled C helpers, the jar is optional; a failed compile is reported, not fatal.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

BUILD_JAR = Path(__file__).resolve().parent / "odradek" / "spark" / "jvm" / "build_jar.py"


class BuildPyWithJar(build_py):
    def run(self) -> None:
        if BUILD_JAR.exists():
            result = subprocess.run([sys.executable, str(BUILD_JAR), "--if-stale"], check=False)
            if result.returncode != 0:
                print("odradek-spark.jar: the build failed; see above", file=sys.stderr)
        super().run()


setup(cmdclass={"build_py": BuildPyWithJar})
