package odradek.source;

import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A JVM reader as Spark finds it (a DataSource V2 {@link TableProvider}, registered under its
 * short name by {@code META-INF/services/...DataSourceRegister} in the jar): the Kafka schema
 * ({@link Schema}) and a read-only table whose scans are the reader's {@link ColumnarScan}.
 *
 * <p>The options are parsed when the table is loaded ({@link #parse}), so a bad option fails
 * {@code load()}; the reader's scan plans when a query runs, each query anew. Only batch reads:
 * the table has no streaming or write capability. A reader adds its name, its options, where its
 * records are (the table's name) and its scan.
 */
public abstract class ReadSource<O extends ReadOptions>
    implements TableProvider, DataSourceRegister {
  private final String name;

  protected ReadSource(String name) {
    this.name = name;
  }

  /** The reader's options; an invalid one throws {@link OptionError}. */
  protected abstract O parse(Map<String, String> options);

  /** Where the records are, as the table's name says it after the short name. */
  protected abstract String where(O options);

  /** One query's scan of the (pruned) schema. */
  protected abstract ColumnarScan<O> scan(StructType schema, O options);

  @Override
  public final String shortName() {
    return name;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return Schema.of(parse(options).includeHeaders);
  }

  @Override
  public Table getTable(
      StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new ReadTable(schema, parse(properties));
  }

  /** The reader's records as a read-only table. */
  public final class ReadTable implements Table, SupportsRead {
    private final StructType schema;
    private final O options;

    ReadTable(StructType schema, O options) {
      this.schema = schema;
      this.options = options;
    }

    @Override
    public String name() {
      return name + " " + where(options);
    }

    @Override
    @SuppressWarnings("deprecation") // columns() is derived from it by default
    public StructType schema() {
      return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return Set.of(TableCapability.BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap ignored) {
      return new ColumnarScan.Builder(schema, pruned -> scan(pruned, options));
    }
  }
}
