from tests.broker_process import BrokerProcess


def test_broker_starts_on_an_ephemeral_port_and_stops_cleanly(broker: BrokerProcess) -> None:
    assert broker.port and broker.port > 0
    assert broker.stop() == 0
    assert broker.events("broker stopped")
    assert (broker.log_dirs[0] / ".kafka_cleanshutdown").exists()
