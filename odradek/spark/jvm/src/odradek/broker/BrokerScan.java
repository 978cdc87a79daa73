package odradek.broker;

import java.util.ArrayList;
import java.util.List;
import odradek.source.ColumnarScan;
import odradek.source.Offsets;
import odradek.source.TopicPartition;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * One query's read through the broker: the shared {@link ColumnarScan} (pruned schema, reader
 * factory) with the plan made on the driver and the columnar readers ({@link FetchReader}).
 *
 * <p>Planning, on one connection ({@link BrokerCluster}): {@link Offsets#discover} the
 * subscribed partitions (Metadata), {@link Offsets#ranges} resolves the offsets (ListOffsets),
 * {@link Offsets#split} applies {@code maxRecordsPerPartition} / {@code minPartitions}: one task
 * per range, as Spark's Kafka source plans ({@link OffsetRange}). The same rules as the Python
 * source and the file reader, in the same code as the latter.
 */
public final class BrokerScan extends ColumnarScan<BrokerOptions> {
  private static final long serialVersionUID = 1L;

  BrokerScan(StructType schema, BrokerOptions options) {
    super(schema, options, BrokerSource.NAME + " [" + String.join(",", options.servers) + "]");
  }

  @Override
  public InputPartition[] planInputPartitions() {
    List<Offsets.Range> ranges;
    try (BrokerCluster cluster = BrokerCluster.open(options)) {
      List<TopicPartition> tps = Offsets.discover(cluster, options.subscription);
      ranges =
          Offsets.split(
              Offsets.ranges(cluster, options, tps),
              options.minPartitions,
              options.maxRecordsPerPartition);
    }
    List<InputPartition> tasks = new ArrayList<>();
    for (Offsets.Range range : ranges) {
      tasks.add(
          new OffsetRange(
              range.tp().topic(), range.tp().partition(), range.from(), range.until()));
    }
    return tasks.toArray(new InputPartition[0]);
  }

  @Override
  protected PartitionReader<ColumnarBatch> open(InputPartition task) {
    return new FetchReader((OffsetRange) task, options, schema);
  }
}
