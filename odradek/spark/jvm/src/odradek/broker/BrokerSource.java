package odradek.broker;

import java.util.Map;
import odradek.source.ColumnarScan;
import odradek.source.ReadSource;
import org.apache.spark.sql.types.StructType;

/**
 * {@code spark.read.format("odradek-jvm").option("kafka.bootstrap.servers", ...)
 * .option("subscribe", t).load()}: a batch read of topics through the broker's Kafka listener
 * (Apache Kafka's wire protocol: Metadata v1, ListOffsets v2, Fetch v5), as a Spark DataSource
 * V2 in the JVM, so rows reach Spark as columnar batches with no Python in between. Same schema
 * and options as the Python {@code format("odradek")} source's batch reads.
 *
 * <p>The options are parsed when the table is loaded ({@link BrokerOptions}), so a bad option
 * fails {@code load()}; the broker is asked and the tasks planned when a query runs ({@link
 * BrokerScan}), each query anew. Only batch reads. The table and its scan builder are the
 * shared {@link ReadSource}'s; the table is named by the bootstrap servers.
 */
public final class BrokerSource extends ReadSource<BrokerOptions> {
  public static final String NAME = "odradek-jvm";

  public BrokerSource() {
    super(NAME);
  }

  @Override
  protected BrokerOptions parse(Map<String, String> options) {
    return BrokerOptions.parse(options);
  }

  @Override
  protected String where(BrokerOptions options) {
    return String.join(",", options.servers);
  }

  @Override
  protected ColumnarScan<BrokerOptions> scan(StructType schema, BrokerOptions options) {
    return new BrokerScan(schema, options);
  }
}
