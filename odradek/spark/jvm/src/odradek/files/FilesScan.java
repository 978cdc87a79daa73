package odradek.files;

import java.io.IOException;
import java.io.UncheckedIOException;
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
 * One query's read: the pruned schema (Spark pushes the columns a query needs down through
 * {@link SupportsPushDownRequiredColumns}; {@code count(*)} needs none), the plan made on the
 * driver (the Python {@code FilesBatchReader.partitions}), and the columnar readers.
 *
 * <p>Planning: {@link LogDirs} lists the roots, {@link Offsets#discover} the subscribed
 * partitions (each must have a directory), {@link Offsets#ranges} resolves the offsets, {@link
 * Offsets#split} applies {@code maxRecordsPerPartition} / {@code minPartitions}, and {@link
 * FilePlanner} cuts each range into tasks by segment and {@code maxPartitionBytes}.
 */
public final class FilesScan implements Scan, Batch {
  private final StructType schema;
  private final FilesOptions options;

  private FilesScan(StructType schema, FilesOptions options) {
    this.schema = schema;
    this.options = options;
  }

  public static final class Builder implements ScanBuilder, SupportsPushDownRequiredColumns {
    private final StructType full;
    private final FilesOptions options;
    private StructType required;

    Builder(StructType full, FilesOptions options) {
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
      return new FilesScan(required, options);
    }
  }

  @Override
  public StructType readSchema() {
    return schema;
  }

  @Override
  public String description() {
    return FilesSource.NAME + " [" + String.join(",", options.logDirs) + "]";
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  @Override
  public InputPartition[] planInputPartitions() {
    LogDirs dirs = new LogDirs(options.logDirs);
    List<TopicPartition> tps = Offsets.discover(dirs, options.subscription);
    for (TopicPartition tp : tps) {
      dirs.partitionLog(tp); // a missing partition directory fails here, naming log.dirs
    }
    List<FileRange> tasks = new ArrayList<>();
    List<Offsets.Range> ranges =
        Offsets.split(
            Offsets.ranges(dirs, options, tps),
            options.minPartitions,
            options.maxRecordsPerPartition);
    try {
      for (Offsets.Range range : ranges) {
        tasks.addAll(
            FilePlanner.plan(
                dirs.partitionLog(range.tp()),
                range,
                options.maxPartitionBytes,
                options.readCommitted));
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
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
    private final FilesOptions options;
    private final StructType schema;

    ReaderFactory(FilesOptions options, StructType schema) {
      this.options = options;
      this.schema = schema;
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
      return true;
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
      return new RangeReader((FileRange) partition, options, schema);
    }

    /** Rows of the same batches, for a caller that asks for rows (Spark asks for batches). */
    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      RangeReader batches = new RangeReader((FileRange) partition, options, schema);
      return new PartitionReader<>() {
        private java.util.Iterator<InternalRow> rows = java.util.Collections.emptyIterator();

        @Override
        public boolean next() throws IOException {
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
        public void close() throws IOException {
          batches.close();
        }
      };
    }
  }
}
