package odradek.broker;

import java.util.Map;
import odradek.source.Cluster;
import odradek.source.DataLoss;
import odradek.source.TopicPartition;

/**
 * The driver's (and a task's, after data loss) {@link Cluster}: one connection to the broker,
 * asking Metadata for every topic (never creating one) and ListOffsets, with the read's
 * isolation level (read_committed: the log end offset is the last stable offset).
 */
final class BrokerCluster implements Cluster, AutoCloseable {
  private final KafkaConnection conn;
  private final boolean readCommitted;

  BrokerCluster(KafkaConnection conn, boolean readCommitted) {
    this.conn = conn;
    this.readCommitted = readCommitted;
  }

  static BrokerCluster open(BrokerOptions options) {
    return new BrokerCluster(
        KafkaConnection.open(options), options.readCommitted);
  }

  @Override
  public Map<String, Integer> topics() {
    return Metadata.topics(conn);
  }

  @Override
  public Map<TopicPartition, Long> listOffsets(Map<TopicPartition, Long> query) {
    return ListOffsets.query(conn, query, readCommitted);
  }

  @Override
  public String where() {
    return DataLoss.BROKER;
  }

  @Override
  public void close() {
    conn.close();
  }
}
