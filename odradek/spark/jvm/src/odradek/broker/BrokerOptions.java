package odradek.broker;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
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
 *   <li>{@code kafka.security.protocol}: {@code PLAINTEXT} (default), {@code SSL}, {@code
 *       SASL_PLAINTEXT} or {@code SASL_SSL}. With TLS, {@code kafka.ssl.truststore.location}: a
 *       PEM file of the CA certificates to trust (without it, the JVM's default trust store)
 *       ({@link Tls}). With SASL ({@link Sasl}), {@code kafka.sasl.mechanism} ({@code PLAIN},
 *       {@code SCRAM-SHA-256}, {@code SCRAM-SHA-512}) and the credentials: {@code
 *       kafka.sasl.jaas.config} ({@code ... required username="..." password="...";}) or
 *       librdkafka's {@code kafka.sasl.username} and {@code kafka.sasl.password}. They travel to
 *       the executors inside the options, as Spark's Kafka source sends them, and appear in no
 *       description or message.
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
  final String saslMechanism; // null: no SASL
  final String saslUsername;
  final String saslPassword;
  private static final Pattern JAAS_FIELD =
      Pattern.compile("(username|password)\\s*=\\s*\"((?:[^\"\\\\]|\\\\.)*)\"");
  private static final List<String> MECHANISMS = List.of("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512");

  private BrokerOptions(Options options, List<String> servers) {
    super(options);
    this.servers = servers;
    Long fetch = options.longValue("fetch.max.bytes", 1024L);
    fetchMaxBytes = (int) Math.min(fetch == null ? DEFAULT_FETCH_BYTES : fetch, 1L << 30);
    pollTimeout = pollTimeoutMs == null ? DEFAULT_POLL_TIMEOUT_MS : pollTimeoutMs;
    String protocol = first(options, "kafka.security.protocol", "security.protocol");
    protocol = protocol == null ? "PLAINTEXT" : protocol.strip().toUpperCase(Locale.ROOT);
    if (!List.of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL").contains(protocol)) {
      throw new OptionError(
          "kafka.security.protocol",
          "expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, got '" + protocol + "'");
    }
    ssl = protocol.endsWith("SSL");
    truststore = first(options, "kafka.ssl.truststore.location", "ssl.truststore.location");
    if (truststore != null && !ssl) {
      throw new OptionError(
          "kafka.ssl.truststore.location",
          "is given without kafka.security.protocol=SSL or SASL_SSL");
    }
    if (!protocol.startsWith("SASL_")) {
      saslMechanism = saslUsername = saslPassword = null;
      return;
    }
    String mechanism = first(options, "kafka.sasl.mechanism", "sasl.mechanism");
    saslMechanism = mechanism == null ? null : mechanism.strip().toUpperCase(Locale.ROOT);
    if (saslMechanism == null || !MECHANISMS.contains(saslMechanism)) {
      throw new OptionError(
          "kafka.sasl.mechanism",
          "expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with " + protocol + ", got "
              + (mechanism == null ? "nothing" : "'" + mechanism + "'"));
    }
    String user = first(options, "kafka.sasl.username", "sasl.username");
    String password = first(options, "kafka.sasl.password", "sasl.password");
    String jaas = first(options, "kafka.sasl.jaas.config", "sasl.jaas.config");
    if (jaas != null) {
      Matcher field = JAAS_FIELD.matcher(jaas);
      while (field.find()) {
        if (field.group(1).equals("username") && user == null) {
          user = field.group(2);
        } else if (field.group(1).equals("password") && password == null) {
          password = field.group(2);
        }
      }
    }
    if (user == null || user.isEmpty() || password == null) {
      throw new OptionError(
          "kafka.sasl.jaas.config",
          "SASL needs username=\"...\" and password=\"...\" in it (or kafka.sasl.username and"
              + " kafka.sasl.password)");
    }
    saslUsername = user;
    saslPassword = password;
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
