"""Fixtures for the Kafka-client compatibility tests: one broker per module (the parent
conftest's ``shared_broker``), a client per test and a unique topic name per test.

``client`` is parametrized over the three unmodified clients (:mod:`.clients`); a test that
needs one client in particular builds it with ``make_client``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek import Admin, NewTopic
from tests.broker.kafka.clients import CLIENTS, KafkaClient, make_client
from tests.broker_process import BrokerProcess

CLIENT_NAMES = sorted(CLIENTS)


@pytest.fixture(params=CLIENT_NAMES)
def client(request: pytest.FixtureRequest, shared_broker: BrokerProcess) -> Iterator[KafkaClient]:
    kafka_client = make_client(request.param, shared_broker.bootstrap)
    yield kafka_client
    kafka_client.close()


@pytest.fixture
def odradek_admin(shared_broker: BrokerProcess) -> Iterator[Admin]:
    with Admin(shared_broker.bootstrap) as admin:
        yield admin


@pytest.fixture
def new_topic(odradek_admin: Admin, topic: str) -> str:
    """``topic``, created with one partition through the odradek client."""
    odradek_admin.create_topics([NewTopic(topic, 1)])
    return topic
