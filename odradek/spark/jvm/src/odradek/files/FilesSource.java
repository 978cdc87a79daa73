package odradek.files;

import java.util.Map;
import java.util.Set;
import odradek.source.Schema;
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
 * {@code spark.read.format("odradek-files").option("log.dirs", ...).option("subscribe", t)
 * .load()}: a batch read of Kafka-format log directories with no broker involved, as a Spark
 * DataSource V2 (registered by {@code META-INF/services/...DataSourceRegister} in the jar).
 *
 * <p>The options are parsed when the table is loaded ({@link FilesOptions}), so a bad option
 * fails {@code load()}; the files are listed and the tasks planned when a query runs ({@link
 * FilesScan}), each query anew. Only batch reads: the table has no streaming or write
 * capability.
 */
public final class FilesSource implements TableProvider, DataSourceRegister {
  public static final String NAME = "odradek-files";

  @Override
  public String shortName() {
    return NAME;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return Schema.of(FilesOptions.parse(options).includeHeaders);
  }

  @Override
  public Table getTable(
      StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new FilesTable(schema, FilesOptions.parse(properties));
  }

  /** The log directories as a read-only table. */
  public static final class FilesTable implements Table, SupportsRead {
    private final StructType schema;
    private final FilesOptions options;

    FilesTable(StructType schema, FilesOptions options) {
      this.schema = schema;
      this.options = options;
    }

    @Override
    public String name() {
      return NAME + " " + String.join(",", options.logDirs);
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
      return new FilesScan.Builder(schema, options);
    }
  }
}
