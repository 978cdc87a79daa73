package odradek.broker;

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
 * {@code spark.read.format("odradek-jvm").option("kafka.bootstrap.servers", ...)
 * .option("subscribe", t).load()}: a batch read of topics through the broker's Kafka listener
 * (Apache Kafka's wire protocol: Metadata v1, ListOffsets v2, Fetch v5), as a Spark DataSource
 * V2 in the JVM, so rows reach Spark as columnar batches with no Python in between. Same schema
 * and options as the Python {@code format("odradek")} source's batch reads.
 *
 * <p>The options are parsed when the table is loaded ({@link BrokerOptions}), so a bad option
 * fails {@code load()}; the broker is asked and the tasks planned when a query runs ({@link
 * BrokerScan}), each query anew. Only batch reads.
 */
public final class BrokerSource implements TableProvider, DataSourceRegister {
  public static final String NAME = "odradek-jvm";

  @Override
  public String shortName() {
    return NAME;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return Schema.of(BrokerOptions.parse(options).includeHeaders);
  }

  @Override
  public Table getTable(
      StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new BrokerTable(schema, BrokerOptions.parse(properties));
  }

  /** The broker's topics as a read-only table. */
  public static final class BrokerTable implements Table, SupportsRead {
    private final StructType schema;
    private final BrokerOptions options;

    BrokerTable(StructType schema, BrokerOptions options) {
      this.schema = schema;
      this.options = options;
    }

    @Override
    public String name() {
      return NAME + " " + String.join(",", options.servers);
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
      return new BrokerScan.Builder(schema, options);
    }
  }
}
