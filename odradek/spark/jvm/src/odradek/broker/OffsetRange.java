package odradek.broker;

import org.apache.spark.sql.connector.read.InputPartition;

/** One task: records {@code fromOffset <= offset < untilOffset} of one topic-partition. */
public record OffsetRange(String topic, int partition, long fromOffset, long untilOffset)
    implements InputPartition {
  private static final long serialVersionUID = 1L;
}
