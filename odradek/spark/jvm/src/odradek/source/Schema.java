package odradek.source;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The rows a read produces: exactly the schema of Spark's built-in Kafka source and of the
 * Python {@code odradek} source ({@code odradek/spark/schema.py}):
 *
 * <pre>
 *   key binary, value binary, topic string, partition int, offset long,
 *   timestamp timestamp, timestampType int [, headers array&lt;struct&lt;key string, value binary&gt;&gt;]
 * </pre>
 *
 * {@code timestampType} is 0 for CreateTime and 1 for LogAppendTime; {@code headers} (only with
 * {@code includeHeaders=true}) is null for a record without headers, as in Spark.
 */
public final class Schema {
  static final ArrayType HEADERS =
      DataTypes.createArrayType(
          new StructType()
              .add("key", DataTypes.StringType)
              .add("value", DataTypes.BinaryType));

  private Schema() {}

  /**
   * The columns of {@code full} that {@code required} names, as Spark pushes them down
   * ({@code SupportsPushDownRequiredColumns}), in {@code required}'s order; {@code count(*)}
   * requires none.
   */
  public static StructType prune(StructType full, StructType required) {
    List<StructField> kept = new ArrayList<>();
    List<String> names = List.of(full.fieldNames());
    for (StructField f : required.fields()) {
      if (names.contains(f.name())) {
        kept.add(full.apply(f.name()));
      }
    }
    return new StructType(kept.toArray(new StructField[0]));
  }

  public static StructType of(boolean includeHeaders) {
    StructType schema =
        new StructType(
            new StructField[] {
              DataTypes.createStructField("key", DataTypes.BinaryType, true),
              DataTypes.createStructField("value", DataTypes.BinaryType, true),
              DataTypes.createStructField("topic", DataTypes.StringType, true),
              DataTypes.createStructField("partition", DataTypes.IntegerType, true),
              DataTypes.createStructField("offset", DataTypes.LongType, true),
              DataTypes.createStructField("timestamp", DataTypes.TimestampType, true),
              DataTypes.createStructField("timestampType", DataTypes.IntegerType, true),
            });
    return includeHeaders ? schema.add("headers", HEADERS, true) : schema;
  }
}
