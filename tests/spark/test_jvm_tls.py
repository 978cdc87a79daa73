"""``format("odradek-jvm")`` over TLS (``kafka.security.protocol=SSL``): a broker with a
plaintext and a TLS listener; the same rows through both, and a broker certificate the trust
store does not vouch for fails the read naming the broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.wire import Wire
from tests.broker_process import BrokerProcess
from tests.spark.jvm_support import all_rows, load
from tests.spark.spark_support import produce

pytestmark = pytest.mark.slow

T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[BrokerProcess]:
    overrides = [
        f"ssl.keystore.location={certs / 'server.pem'}",
        f"ssl.truststore.location={certs / 'ca.pem'}",
        "ssl.client.auth=none",
    ]
    logs = tmp_path_factory.mktemp("jvm-tls") / "logs"
    broker = BrokerProcess([logs], listeners=("PLAINTEXT", "SSL"), overrides=overrides).start()
    yield broker
    broker.stop()


def test_the_same_rows_over_tls(spark: Any, tls_broker: BrokerProcess, certs: Path) -> None:
    topic = "tls-read"
    with Wire(tls_broker.ports["PLAINTEXT"]) as wire:
        wire.create_topic(topic, partitions=2)
        for p in range(2):
            produce(wire, topic, p, [(b"k", f"{p}-{i}".encode(), T0 + i) for i in range(100)])
    tls = f"127.0.0.1:{tls_broker.ports['SSL']}"
    over_tls = load(
        spark,
        "odradek-jvm",
        tls,
        subscribe=topic,
        **{
            "kafka.security.protocol": "SSL",
            "kafka.ssl.truststore.location": str(certs / "ca.pem"),
        },
    )
    plain = load(
        spark, "odradek-jvm", f"127.0.0.1:{tls_broker.ports['PLAINTEXT']}", subscribe=topic
    )
    rows = all_rows(over_tls)
    assert len(rows) == 200
    assert rows == all_rows(plain)


def test_an_untrusted_broker_certificate_fails_naming_the_broker(
    spark: Any, tls_broker: BrokerProcess, certs: Path
) -> None:
    tls = f"127.0.0.1:{tls_broker.ports['SSL']}"
    df = load(
        spark,
        "odradek-jvm",
        tls,
        subscribe="anything",
        **{
            "kafka.security.protocol": "SSL",
            "kafka.ssl.truststore.location": str(certs / "other-ca.pem"),
        },
    )
    with pytest.raises(Exception, match=f"cannot connect to the broker at {tls}"):
        df.collect()
