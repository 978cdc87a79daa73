package odradek.broker;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import odradek.source.OptionError;
import odradek.source.Options;
import odradek.source.ReadOptions;

/**
 * The options of {@code format("odradek-jvm")}, validated when the table is loaded, so a bad
 * option fails the query before any task runs: the shared batch-read options ({@link
 * ReadOptions}, the Python {@code odradek} source's) plus where the broker is and how to fetch:
 *
 * <ul>
 *   <li>{@code kafka.bootstrap.servers} (or {@code bootstrap.servers}): comma-separated {@code
 *       host:port} of the broker's Kafka listener; default {@code 127.0.0.1:9092}, as the Python
 *       source. {@code log.dirs} is refused: that is {@code format("odradek-files")}.
 *   <li>{@code fetch.max.bytes}: the byte limit of one Fetch (default 8 MiB, at least 1024); a
 *       batch larger than that still comes back whole.
 *   <li>{@code kafkaConsumer.pollTimeoutMs}: how long a task waits for a planned offset that the
 *       broker does not serve yet before it fails (default 120000).
 *   <li>{@code kafka.security.protocol} ({@code PLAINTEXT} default, or {@code SSL}) and, for
 *       SSL, {@code kafka.ssl.truststore.location}: a PEM file of the CA certificates to trust
 *       (without it, the JVM's default trust store) ({@link Tls}).
 * </ul>
 */
public final class BrokerOptions extends ReadOptions {
  private static final long serialVersionUID = 1L;
  static final String DEFAULT_BOOTSTRAP = "127.0.0.1:9092";
  static final int DEFAULT_FETCH_BYTES = 8 << 20;
  static final long DEFAULT_POLL_TIMEOUT_MS = 120_000;

  final List<String> servers;
  final int fetchMaxBytes;
  final long pollTimeout;
  final boolean ssl;
  final String truststore; // a PEM file, or null: the JVM's trust store

  private BrokerOptions(Options options, List<String> servers) {
    super(options);
    this.servers = servers;
    Long fetch = options.longValue("fetch.max.bytes", 1024L);
    fetchMaxBytes = (int) Math.min(fetch == null ? DEFAULT_FETCH_BYTES : fetch, 1L << 30);
    pollTimeout = pollTimeoutMs == null ? DEFAULT_POLL_TIMEOUT_MS : pollTimeoutMs;
    String protocol = first(options, "kafka.security.protocol", "security.protocol");
    protocol = protocol == null ? "PLAINTEXT" : protocol.strip().toUpperCase(java.util.Locale.ROOT);
    if (!protocol.equals("PLAINTEXT") && !protocol.equals("SSL")) {
      throw new OptionError(
          "kafka.security.protocol",
          "expected PLAINTEXT or SSL, got '" + protocol + "' (SASL is not supported here)");
    }
    ssl = protocol.equals("SSL");
    truststore = first(options, "kafka.ssl.truststore.location", "ssl.truststore.location");
    if (truststore != null && !ssl) {
      throw new OptionError(
          "kafka.ssl.truststore.location", "is given without kafka.security.protocol=SSL");
    }
  }

  private static String first(Options options, String name, String alias) {
    String value = options.get(name);
    return value != null ? value : options.get(alias);
  }

  public static BrokerOptions parse(Map<String, String> given) {
    Options options = new Options(given);
    if (options.get("log.dirs") != null) {
      throw new OptionError(
          "log.dirs",
          "format(\"odradek-jvm\") reads through the broker; log directories are read by"
              + " format(\"odradek-files\")");
    }
    // the Python source's precedence: bootstrap.servers, then kafka.bootstrap.servers
    String name = options.get("bootstrap.servers") != null
        ? "bootstrap.servers" : "kafka.bootstrap.servers";
    String raw = options.get(name);
    List<String> servers = new ArrayList<>();
    if (raw == null) {
      servers.add(DEFAULT_BOOTSTRAP);
    } else {
      LinkedHashSet<String> seen = new LinkedHashSet<>();
      for (String s : raw.split(",", -1)) {
        if (!s.strip().isEmpty()) {
          seen.add(s.strip());
        }
      }
      if (seen.isEmpty()) {
        throw new OptionError(name, "is empty");
      }
      for (String server : seen) {
        int colon = server.lastIndexOf(':');
        String port = colon < 0 ? "" : server.substring(colon + 1);
        if (colon <= 0 || port.isEmpty() || !port.chars().allMatch(Character::isDigit)
            || port.length() > 5 || Integer.parseInt(port) > 65535) {
          throw new OptionError(name, "expected host:port, got '" + server + "'");
        }
      }
      servers.addAll(seen);
    }
    return new BrokerOptions(options, List.copyOf(servers));
  }
}
