package odradek.broker;

import java.util.ArrayList;
import java.util.List;
import odradek.source.Offsets;
import odradek.source.Schema;
import odradek.source.TopicPartition;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * One query's read through the broker: the pruned schema (Spark pushes the columns a query
 * needs down through {@link SupportsPushDownRequiredColumns}; {@code count(*)} needs none), the
 * plan made on the driver, and the columnar readers ({@link FetchReader}).
 *
 * <p>Planning, on one connection ({@link BrokerCluster}): {@link Offsets#discover} the
 * subscribed partitions (Metadata), {@link Offsets#ranges} resolves the offsets (ListOffsets),
 * {@link Offsets#split} applies {@code maxRecordsPerPartition} / {@code minPartitions}: one task
 * per range, as Spark's Kafka source plans ({@link OffsetRange}). The same rules as the Python
 * source and the file reader, in the same code as the latter.
 */
public final class BrokerScan implements Scan, Batch {
  private final StructType schema;
  private final BrokerOptions options;

  private BrokerScan(StructType schema, BrokerOptions options) {
    this.schema = schema;
    this.options = options;
  }

  public static final class Builder implements ScanBuilder, SupportsPushDownRequiredColumns {
    private final StructType full;
    private final BrokerOptions options;
    private StructType required;

    Builder(StructType full, BrokerOptions options) {
      this.full = full;
      this.options = options;
      this.required = full;
    }

    @Override
    public void pruneColumns(StructType requiredSchema) {
      required = Schema.prune(full, requiredSchema);
    }

    @Override
    public Scan build() {
      return new BrokerScan(required, options);
    }
  }

  @Override
  public StructType readSchema() {
    return schema;
  }

  @Override
  public String description() {
    return BrokerSource.NAME + " [" + String.join(",", options.servers) + "]";
  }

  @Override
  public Batch toBatch() {
    return this;
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
  public PartitionReaderFactory createReaderFactory() {
    return new ReaderFactory(options, schema);
  }

  /** Sent to the executors: every task reads columnar batches. */
  public static final class ReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    private final BrokerOptions options;
    private final StructType schema;

    ReaderFactory(BrokerOptions options, StructType schema) {
      this.options = options;
      this.schema = schema;
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
      return true;
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
      return new FetchReader((OffsetRange) partition, options, schema);
    }

    /** Rows of the same batches, for a caller that asks for rows (Spark asks for batches). */
    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      FetchReader batches = new FetchReader((OffsetRange) partition, options, schema);
      return new PartitionReader<>() {
        private java.util.Iterator<InternalRow> rows = java.util.Collections.emptyIterator();

        @Override
        public boolean next() {
          while (!rows.hasNext()) {
            if (!batches.next()) {
              return false;
            }
            rows = batches.get().rowIterator();
          }
          return true;
        }

        @Override
        public InternalRow get() {
          return rows.next();
        }

        @Override
        public void close() {
          batches.close();
        }
      };
    }
  }
}
