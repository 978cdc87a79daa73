"""The artifacts users install: the sdist and the wheel ``make dist`` builds.

``python -m build`` builds the sdist, then the wheel *from the sdist*, so a wheel here also
proves the sdist carries what a rebuild needs. The wheel is installed (with its ``spark``
extra) into a fresh virtual environment in a temp dir; everything after that runs the venv's
own interpreter in isolated mode (``-I``: no current directory, no ``PYTHONPATH``) from the
temp dir, so the repository is not on ``sys.path`` and only the installed copy can answer.
This is also what the container image does: its build stage builds the wheel, its final
stage installs that wheel and runs ``odradek serve`` configured by ``ODRADEK_*`` variables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import textwrap
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.broker_process import REPO, BrokerProcess
from tests.test_container import dockerfile_env

pytestmark = pytest.mark.slow

# the compiled helpers (protocol/native.py), as wheel paths without the platform suffix
CLIENT_COMPILED = ["odradek/client/_record_buffer", "odradek/client/_record_decoder"]
PROTOCOL_COMPILED = ["odradek/protocol/_kafka_produce", "odradek/protocol/_validate"]
SPARK_COMPILED = ["odradek/spark/_arrow_records"]

BARE_NAMES = ["protocol", "storage", "broker", "client", "cli", "pipelines", "pyspark_odradek"]


@dataclass(frozen=True)
class Dist:
    wheel: Path
    sdist: Path


@dataclass(frozen=True)
class Installed:
    root: Path  # the venv
    python: Path
    odradek: Path  # the console script
    home: Path  # an empty working directory outside the repository

    def run(self, code: str, *args: str) -> str:
        """Run ``code`` with the venv's interpreter, isolated, from ``home``; its stdout."""
        result = subprocess.run(
            [str(self.python), "-I", "-c", textwrap.dedent(code), *args],
            cwd=self.home,
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout


def _clean_env() -> dict[str, str]:
    """This process's environment without anything that could put the checkout on a path."""
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "NO_ODRADEK_EXTENSIONS"}
    return {k: v for k, v in os.environ.items() if k not in drop}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    outdir = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(outdir), str(REPO)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = outdir.glob("odradek-*.whl")
    (sdist,) = outdir.glob("odradek-*.tar.gz")
    return Dist(wheel=wheel, sdist=sdist)


@pytest.fixture(scope="module")
def installed(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True).create(root)
    python = root / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", f"{dist.wheel}[spark]"],
        check=True,
        capture_output=True,
        env=_clean_env(),
        timeout=900,
    )
    home = tmp_path_factory.mktemp("home")
    return Installed(root=root, python=python, odradek=root / "bin" / "odradek", home=home)


def test_the_wheel_holds_odradek_alone(dist: Dist) -> None:
    with zipfile.ZipFile(dist.wheel) as wheel:
        names = wheel.namelist()
    top_level = {name.split("/")[0] for name in names}
    dist_info = {name for name in top_level if name.endswith(".dist-info")}
    assert top_level - dist_info == {"odradek"}, sorted(top_level)
    (info,) = dist_info
    assert "odradek/py.typed" in names
    assert f"{info}/licenses/LICENSE" in names
    for layer in (
        "protocol",
        "storage",
        "broker",
        "client",
        "cli",
        "console",
        "spark",
        "pipelines",
    ):
        assert f"odradek/{layer}/__init__.py" in names, layer
    # the console's pages, styles and scripts (package data: no CDN, nothing to build)
    static = REPO / "odradek" / "console" / "static"
    shipped = sorted(p.name for p in static.iterdir())
    assert {"topics.html", "common.js", "console.css"} <= set(shipped)
    for name in shipped:
        assert f"odradek/console/static/{name}" in names, name
    compiled = sorted(n for n in names if n.endswith(".so"))
    modules = [n.split(".")[0] for n in compiled]
    assert modules == [*CLIENT_COMPILED, *PROTOCOL_COMPILED, *SPARK_COMPILED], compiled
    # nothing from the checkout's side: tests, benchmarks, C sources
    assert not [n for n in names if n.startswith(("tests/", "bench/")) or n.endswith(".c")]
    # format("odradek-files"): the jar, not its sources
    assert "odradek/spark/jars/odradek-spark.jar" in names
    assert not [n for n in names if n.endswith(".java") or "/jvm/" in n]


def test_every_source_package_is_in_the_wheel(dist: Dist) -> None:
    # pyproject.toml lists the packages by hand: a new sub-package must not be left out.
    with zipfile.ZipFile(dist.wheel) as wheel:
        names = set(wheel.namelist())
    mapped = {"protocol": "odradek/protocol", "storage": "odradek/storage"}
    mapped |= {"broker": "odradek/broker", "odradek": "odradek"}
    for folder, installed_as in mapped.items():
        for init in (REPO / folder).rglob("__init__.py"):
            relative = init.relative_to(REPO / folder).as_posix()
            assert f"{installed_as}/{relative}" in names, f"{folder}/{relative} is not shipped"


def test_the_metadata_passes_twine_check(dist: Dist) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(dist.wheel), str(dist.sdist)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_sdist_carries_the_sources_and_the_tests(dist: Dist) -> None:
    with tarfile.open(dist.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    expected = {
        "pyproject.toml",
        "MANIFEST.in",
        "LICENSE",
        "README.md",
        "Makefile",
        "config/server.properties",
        "odradek/client/_record_buffer.c",
        "odradek/client/_record_decoder.c",
        "odradek/spark/_arrow_records.c",
        "odradek/spark/jvm/build_jar.py",
        "odradek/spark/jvm/src/odradek/files/FilesSource.java",
        "odradek/spark/jvm/resources/META-INF/services/"
        "org.apache.spark.sql.sources.DataSourceRegister",
        "odradek/spark/jars/odradek-spark.jar",
        "setup.py",
        "protocol/_validate.c",
        "protocol/_kafka_produce.c",
        "protocol/records.py",
        "storage/log.py",
        "broker/server.py",
        "docs/architecture.md",
        "docs/protocol.md",
        "tests/conftest.py",
        "tests/testdata/kafka-written/README.md",
        "tests/testdata/kafka-written/cluster-metadata-a.log",
    }
    assert expected <= names, sorted(expected - names)
    assert not [n for n in names if n.endswith((".so", ".pyc"))]


def test_only_the_odradek_namespace_is_importable(installed: Installed) -> None:
    out = installed.run(
        """
        import importlib.util, json, sys
        import odradek
        from odradek import Admin, AsyncProducer, Consumer, Producer, TopicPartition
        from odradek.protocol import native, validate
        bare = [n for n in sys.argv[1:] if importlib.util.find_spec(n) is not None]
        compiled = [native.load("odradek.client._record_buffer")]
        compiled.append(native.load("odradek.client._record_decoder"))
        compiled.append(native.load("odradek.protocol._kafka_produce"))
        compiled.append(native.load("odradek.protocol._validate"))
        assert validate._walk is compiled[-1].walk_records
        compiled.append(native.load("odradek.spark._arrow_records"))
        print(json.dumps({
            "odradek": odradek.__file__,
            "version": odradek.__version__,
            "producer": Producer.__module__,
            "bare": bare,
            "compiled": [m.__file__ if m else None for m in compiled],
        }))
        """,
        *BARE_NAMES,
    )
    found = json.loads(out)
    site = str(installed.root)
    assert found["odradek"].startswith(site), found
    assert found["producer"] == "odradek.client.producer"
    assert found["bare"] == []
    assert all(path and path.startswith(site) for path in found["compiled"]), found


def test_the_installed_spark_source_imports(installed: Installed) -> None:
    out = installed.run(
        """
        import odradek.spark
        from pyspark.sql.datasource import DataSource
        source = odradek.spark.OdradekDataSource
        assert issubclass(source, DataSource)
        print(source.name(), source.__module__, odradek.spark.__file__, odradek.spark.jar_path())
        """
    )
    name, module, path, jar = out.split()
    assert (name, module) == ("odradek", "odradek.spark.source")
    assert path.startswith(str(installed.root))
    assert jar.startswith(str(installed.root)) and jar.endswith("odradek-spark.jar")


def test_the_installed_broker_serves_the_installed_client(
    installed: Installed, tmp_path: Path
) -> None:
    """The image's steps: the installed ``odradek serve`` configured by the image's
    ``ODRADEK_*`` variables (the listener moved to an ephemeral loopback port), and the
    installed client producing and consuming through ``from odradek import ...``."""
    data = tmp_path / "data"
    env = _clean_env() | dockerfile_env()
    env |= {"ODRADEK_LOG_DIRS": str(data), "ODRADEK_LISTENERS": "PLAINTEXT://127.0.0.1:0"}
    del env["ODRADEK_ADVERTISED_LISTENERS"]  # the image's names the host; here: the bound port
    broker = BrokerProcess([data], program=[str(installed.odradek)], cwd=installed.home, env=env)
    with broker:
        out = installed.run(
            """
            import sys
            from odradek import Admin, Consumer, NewTopic, Producer, TopicPartition
            bootstrap = sys.argv[1]
            with Admin(bootstrap) as admin:
                admin.create_topics([NewTopic("installed", num_partitions=2)])
            with Producer(bootstrap, acks="all", linger_ms=1) as producer:
                sent = [producer.send("installed", b"v%d" % i, key=b"k%d" % i) for i in range(500)]
                producer.flush()
                assert all(f.result().offset >= 0 for f in sent)
            with Consumer(bootstrap_servers=bootstrap, consumer_timeout_ms=2000) as consumer:
                consumer.assign([TopicPartition("installed", p) for p in (0, 1)])
                consumer.seek_to_beginning()
                got = sorted((r.key, r.value) for r in consumer)
            print(len(got), got == sorted((b"k%d" % i, b"v%d" % i) for i in range(500)))
            """,
            broker.bootstrap,
        )
        assert out.split() == ["500", "True"]
    assert broker.process is not None and broker.process.returncode == 0
    assert (data / ".kafka_cleanshutdown").exists()
    assert sorted(p.name for p in data.glob("installed-*")) == ["installed-0", "installed-1"]
