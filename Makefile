# odradek: `make run` starts the broker on the shipped config, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# format("odradek-files"), the JVM reader: compiled against the venv's pyspark jars
JAR := odradek/spark/jars/odradek-spark.jar
JAVA_SOURCES := $(shell find odradek/spark/jvm -type f -not -path '*/__pycache__/*')

.PHONY: install run test dist reliability lint format bench clean screenshots

install: $(STAMP) $(JAR)

$(STAMP): pyproject.toml $(wildcard odradek/client/*.c odradek/spark/*.c protocol/*.c)
	@command -v java >/dev/null 2>&1 || { \
		echo "Java 17 (for PySpark) is missing: installing Debian's openjdk-17-jre-headless"; \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless; }
	@command -v kcat >/dev/null 2>&1 || { \
		echo "kcat (a Kafka client the compatibility tests run) is missing: installing Debian's kcat"; \
		{ apt-get update -qq && apt-get install -y -qq --no-install-recommends kcat; } \
		|| echo "could not install kcat: tests/broker/kafka/test_kcat.py will be skipped"; }
	@command -v chromium >/dev/null 2>&1 || { \
		echo "Chromium (the console's browser tests drive it) is missing: installing Debian's chromium"; \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium; }
	@command -v fusermount3 >/dev/null 2>&1 || { \
		echo "fuse3 (the power-cut tests' file system, tests/powercut) is missing: installing Debian's fuse3"; \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends fuse3; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

$(JAR): $(STAMP) $(JAVA_SOURCES)
	@command -v javac >/dev/null 2>&1 || { \
		echo "javac (a JDK 17, to build odradek-spark.jar) is missing: installing Debian's openjdk-17-jdk-headless"; \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless; }
	$(PY) odradek/spark/jvm/build_jar.py --require

run: $(STAMP)
	$(VENV)/bin/odradek serve --config config/server.properties

# The second pytest run puts the compiled helpers' callers on their pure-Python paths
# (protocol/native.py): the client, the broker's record validation and Produce decoding.
# (The client's TLS/SASL, group, admin, error and retry tests run once: they test its
# connections, membership and error handling, not its record paths.)
# Both passes run on TEST_WORKERS pytest-xdist workers, a test file per worker at a time (its
# module-scoped brokers stay in one process): most tests wait on brokers, sockets and timers,
# so two workers on this 2-core machine take ~0.6 of the serial time (852 s -> 523 s).
# `make test TEST_WORKERS=0` runs them in one process.
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile
PURE_SKIP := test_security.py test_groups.py faces/test_groups.py test_admin.py \
	faces/test_admin.py faces/test_admin_edges.py test_errors.py test_retry.py
test: $(STAMP) $(JAR)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(PYTEST)
	NO_ODRADEK_EXTENSIONS=1 $(PYTEST) -q $(PURE_SKIP:%=--ignore=tests/client/%) \
		tests/client tests/spark/test_decode.py tests/spark/test_arrow_records.py \
		tests/protocol/test_validate.py tests/protocol/test_validate_native.py \
		tests/protocol/kafka/test_produce_native.py

# The README's console screenshot (docs/console.png), taken by the console's browser tests.
screenshots: $(STAMP) $(JAR)
	ODRADEK_UPDATE_SCREENSHOTS=1 $(PY) -m pytest -q tests/console/test_pages.py

# The sdist and the wheel (built from the sdist), checked as a package index checks them.
dist: $(STAMP) $(JAR)
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(VENV)/bin/twine check --strict dist/*

# The long reliability runs (the fast part of each suite is in `make test`).
reliability: $(STAMP) $(JAR) $(VENV)/.bench-installed
	CHAOS_CYCLES=50 POWERCUT_CYCLES=250 $(PY) -m pytest -q tests/reliability
	$(PY) -m bench --only soak

lint: $(STAMP)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(STAMP) $(JAR) $(VENV)/.bench-installed
	$(PY) -m bench

$(VENV)/.bench-installed: pyproject.toml $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,bench]'
	touch $@

clean:
	rm -rf $(VENV) data dist .pytest_cache .hypothesis build *.egg-info odradek/spark/jars
