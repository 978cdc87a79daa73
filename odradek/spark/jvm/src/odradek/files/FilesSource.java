package odradek.files;

import java.util.Map;
import odradek.source.ColumnarScan;
import odradek.source.ReadSource;
import org.apache.spark.sql.types.StructType;

/**
 * {@code spark.read.format("odradek-files").option("log.dirs", ...).option("subscribe", t)
 * .load()}: a batch read of Kafka-format log directories with no broker involved, as a Spark
 * DataSource V2 (registered by {@code META-INF/services/...DataSourceRegister} in the jar).
 *
 * <p>The options are parsed when the table is loaded ({@link FilesOptions}), so a bad option
 * fails {@code load()}; the files are listed and the tasks planned when a query runs ({@link
 * FilesScan}), each query anew. Only batch reads: the table has no streaming or write
 * capability. The table and its scan builder are the shared {@link ReadSource}'s; the table is
 * named by the log directories.
 */
public final class FilesSource extends ReadSource<FilesOptions> {
  public static final String NAME = "odradek-files";

  public FilesSource() {
    super(NAME);
  }

  @Override
  protected FilesOptions parse(Map<String, String> options) {
    return FilesOptions.parse(options);
  }

  @Override
  protected String where(FilesOptions options) {
    return String.join(",", options.logDirs);
  }

  @Override
  protected ColumnarScan<FilesOptions> scan(StructType schema, FilesOptions options) {
    return new FilesScan(schema, options);
  }
}
