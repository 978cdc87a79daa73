package odradek.records;

import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The column vectors of one task, allocated once and reused for every {@link ColumnarBatch} it
 * returns (Spark consumes a batch before asking for the next). Only the columns of the pruned
 * read schema exist: a vector that is null here is never written, so {@code count(*)} decodes
 * nothing but batch headers. {@code topic} and {@code partition} are constants of the task
 * ({@link ConstantColumnVector}); the others are {@link OnHeapColumnVector}s filled in place:
 * a batch's records section is appended once to the {@code key} and {@code value} vectors' byte
 * arrays and each row points into it ({@link RecordDecoder}), so no object and no copy is made
 * per record.
 */
public final class Columns implements AutoCloseable {
  private static final int INITIAL_ROWS = 4096;

  final StructType schema;
  final WritableColumnVector key;
  final WritableColumnVector value;
  final WritableColumnVector offset;
  final WritableColumnVector timestamp;
  final WritableColumnVector timestampType;
  final WritableColumnVector headers;
  /** Whether any column needs the records themselves (false: counting rows is enough). */
  public final boolean perRecord;

  private final UTF8String topicValue;
  private final int partitionValue;
  private final WritableColumnVector[] all;
  public int rows;
  private int capacity = INITIAL_ROWS;

  public Columns(StructType schema, String topic, int partition) {
    this.schema = schema;
    this.topicValue = UTF8String.fromString(topic);
    this.partitionValue = partition;
    key = vector("key");
    value = vector("value");
    offset = vector("offset");
    timestamp = vector("timestamp");
    timestampType = vector("timestampType");
    headers = vector("headers");
    all = new WritableColumnVector[] {key, value, offset, timestamp, timestampType, headers};
    boolean any = false;
    for (WritableColumnVector v : all) {
      any |= v != null;
    }
    perRecord = any;
  }

  private WritableColumnVector vector(String name) {
    for (StructField f : schema.fields()) {
      if (f.name().equals(name)) {
        return new OnHeapColumnVector(INITIAL_ROWS, f.dataType());
      }
    }
    return null;
  }

  /** Room for {@code more} rows after the current ones. */
  void reserve(int more) {
    int needed = rows + more;
    if (needed > capacity) {
      capacity = Math.max(needed, capacity * 2);
      for (WritableColumnVector v : all) {
        if (v != null) {
          v.reserve(capacity);
        }
      }
    }
  }

  public void reset() {
    rows = 0;
    for (WritableColumnVector v : all) {
      if (v != null) {
        v.reset();
      }
    }
  }

  /** The current rows as a batch in the read schema's column order. */
  public ColumnarBatch batch() {
    ColumnVector[] vectors = new ColumnVector[schema.fields().length];
    for (int i = 0; i < vectors.length; i++) {
      StructField f = schema.fields()[i];
      vectors[i] =
          switch (f.name()) {
            case "key" -> key;
            case "value" -> value;
            case "offset" -> offset;
            case "timestamp" -> timestamp;
            case "timestampType" -> timestampType;
            case "headers" -> headers;
            case "topic" -> {
              ConstantColumnVector c = new ConstantColumnVector(rows, f.dataType());
              c.setUtf8String(topicValue);
              yield c;
            }
            case "partition" -> {
              ConstantColumnVector c = new ConstantColumnVector(rows, f.dataType());
              c.setInt(partitionValue);
              yield c;
            }
            default -> throw new IllegalStateException("no column " + f.name());
          };
    }
    return new ColumnarBatch(vectors, rows);
  }

  @Override
  public void close() {
    for (WritableColumnVector v : all) {
      if (v != null) {
        v.close();
      }
    }
  }
}
