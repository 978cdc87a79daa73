"""The Spark data sources over SASL: a batch write and a batch read with a real Spark session,
the connection's security given as Spark's Kafka source takes it (``kafka.``-prefixed Kafka
properties), reaching the driver's and the executors' clients, through ``format("odradek")``
and the JVM reader ``format("odradek-jvm")`` (PLAIN and both SCRAMs, with and without TLS); a
wrong password fails the query with the broker's reason and without the password."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.security.conftest import USER, USER_PASSWORD, start_secure_broker
from tests.broker_process import BrokerProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def secure_broker(
    tmp_path_factory: pytest.TempPathFactory, certs: Path
) -> Iterator[tuple[BrokerProcess, Path]]:
    broker = start_secure_broker(tmp_path_factory.mktemp("spark-secure") / "logs", certs)
    yield broker, certs
    broker.stop()


def _security(
    broker: BrokerProcess,
    certs: Path,
    password: str,
    protocol: str = "SASL_SSL",
    mechanism: str = "SCRAM-SHA-256",
) -> dict[str, str]:
    options = {
        "kafka.bootstrap.servers": f"127.0.0.1:{broker.ports[protocol]}",
        "kafka.security.protocol": protocol,
        "kafka.sasl.mechanism": mechanism,
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        f'required username="{USER}" password="{password}";',
    }
    if protocol == "SASL_SSL":
        options["kafka.ssl.truststore.location"] = str(certs / "ca.pem")
    return options


def test_write_and_read_over_sasl_ssl(
    spark: Any, secure_broker: tuple[BrokerProcess, Path]
) -> None:
    broker, certs = secure_broker
    options = {**_security(broker, certs, USER_PASSWORD), "kafka.request.timeout.ms": "10000"}
    rows = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(200)]
    (
        spark.createDataFrame(rows, "key binary, value binary")
        .write.format("odradek")
        .options(**options)
        .option("topic", "secured-spark")
        .mode("append")
        .save()
    )
    read = (
        spark.read.format("odradek")
        .options(**options)
        .option("subscribe", "secured-spark")
        .load()
        .select("key", "value")
        .collect()
    )
    assert sorted((bytes(r.key), bytes(r.value)) for r in read) == sorted(rows)


def test_a_wrong_password_fails_the_query(
    spark: Any, secure_broker: tuple[BrokerProcess, Path]
) -> None:
    broker, certs = secure_broker
    for source, refusal in (("odradek", "SaslAuthenticationFailed"), ("odradek-jvm", "failed")):
        options = _security(broker, certs, "wrong password")
        with pytest.raises(Exception, match=refusal) as failure:
            spark.read.format(source).options(**options).option("subscribe", "x").load().count()
        assert "wrong password" not in str(failure.value)


@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "SCRAM-SHA-256"), ("SASL_SSL", "PLAIN")],
)
def test_the_jvm_reader_authenticates(
    spark: Any, secure_broker: tuple[BrokerProcess, Path], protocol: str, mechanism: str
) -> None:
    """The rows the Python source reads over SASL_SSL, through odradek-jvm's own SASL."""
    broker, certs = secure_broker
    reference = _security(broker, certs, USER_PASSWORD)
    rows = [(f"j{i}".encode(), f"w{i}".encode()) for i in range(100)]
    (
        spark.createDataFrame(rows, "key binary, value binary")
        .write.format("odradek")
        .options(**reference)
        .option("topic", f"jvm-{mechanism.lower()}-{protocol.lower()}")
        .mode("append")
        .save()
    )
    read = (
        spark.read.format("odradek-jvm")
        .options(**_security(broker, certs, USER_PASSWORD, protocol, mechanism))
        .option("subscribe", f"jvm-{mechanism.lower()}-{protocol.lower()}")
        .load()
        .select("key", "value")
        .collect()
    )
    assert sorted((bytes(r.key), bytes(r.value)) for r in read) == sorted(rows)
