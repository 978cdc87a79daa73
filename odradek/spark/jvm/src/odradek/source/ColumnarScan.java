package odradek.source;

import java.io.IOException;
import java.io.Serializable;
import java.util.Collections;
import java.util.Iterator;
import java.util.function.Function;
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
 * One query's read, as both JVM readers make it: the pruned schema (Spark pushes the columns a
 * query needs down through {@link SupportsPushDownRequiredColumns}; {@code count(*)} needs
 * none), the plan made on the driver and the columnar readers on the executors. A reader's scan
 * adds its description, its planning ({@link #planInputPartitions}) and the reader a task opens
 * ({@link #open}).
 *
 * <p>The scan is {@link Serializable} (its schema and options): its {@link ReaderFactory} is sent
 * to the executors with it.
 */
public abstract class ColumnarScan<O extends ReadOptions> implements Scan, Batch, Serializable {
  private static final long serialVersionUID = 1L;
  protected final StructType schema;
  protected final O options;
  private final String description;

  protected ColumnarScan(StructType schema, O options, String description) {
    this.schema = schema;
    this.options = options;
    this.description = description;
  }

  /** The columnar reader of one planned task (executor side). */
  protected abstract PartitionReader<ColumnarBatch> open(InputPartition task);

  /** Spark's scan builder: the full schema until Spark prunes it, then the scan {@code build}s. */
  public static final class Builder implements ScanBuilder, SupportsPushDownRequiredColumns {
    private final StructType full;
    private final Function<StructType, Scan> build;
    private StructType required;

    public Builder(StructType full, Function<StructType, Scan> build) {
      this.full = full;
      this.build = build;
      this.required = full;
    }

    @Override
    public void pruneColumns(StructType requiredSchema) {
      required = Schema.prune(full, requiredSchema);
    }

    @Override
    public Scan build() {
      return build.apply(required);
    }
  }

  @Override
  public StructType readSchema() {
    return schema;
  }

  @Override
  public String description() {
    return description;
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new ReaderFactory(this);
  }

  /** Sent to the executors: every task reads columnar batches. */
  public static final class ReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    private final ColumnarScan<?> scan;

    ReaderFactory(ColumnarScan<?> scan) {
      this.scan = scan;
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
      return true;
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
      return scan.open(partition);
    }

    /** Rows of the same batches, for a caller that asks for rows (Spark asks for batches). */
    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      PartitionReader<ColumnarBatch> batches = scan.open(partition);
      return new PartitionReader<>() {
        private Iterator<InternalRow> rows = Collections.emptyIterator();

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
