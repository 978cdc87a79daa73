package odradek.files;

import java.io.Serializable;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;

/**
 * The options of {@code format("odradek-files")}, validated when the table is loaded, so a bad
 * option fails the query before any task runs. They are the Python source's batch-read options
 * (the names and rules of Spark's Kafka source) plus the file reader's own:
 *
 * <ul>
 *   <li>{@code log.dirs}: comma-separated roots (Kafka's {@code log.dirs}); each must be a
 *       directory. {@code bootstrap.servers} with it is refused: the read involves no broker.
 *   <li>{@code subscribe} / {@code subscribePattern} / {@code assign} ({@link Subscription}).
 *   <li>{@code startingOffsets} / {@code endingOffsets} ({@code earliest|latest|JSON}), {@code
 *       startingTimestamp} / {@code endingTimestamp}, {@code startingOffsetsByTimestamp} /
 *       {@code endingOffsetsByTimestamp}, {@code startingOffsetsByTimestampStrategy} ({@code
 *       error|latest}) ({@link OffsetSpec}).
 *   <li>{@code minPartitions}, {@code maxRecordsPerPartition}: more tasks ({@link OffsetRanges}).
 *   <li>{@code maxPartitionBytes}: a task reads at most about this many bytes of one segment
 *       (default 128 MiB, Spark's {@code spark.sql.files.maxPartitionBytes}).
 *   <li>{@code isolation.level} ({@code kafka.isolation.level}): {@code read_committed}
 *       (default) leaves out the batches of aborted transactions listed in {@code .txnindex}
 *       files; {@code read_uncommitted} keeps them. Control batches are never rows.
 *   <li>{@code includeHeaders}, {@code failOnDataLoss} (default true).
 *   <li>{@code fetch.max.bytes}: the size of a task's reads (default 256 KiB; an entry larger
 *       than that is read whole).
 * </ul>
 */
public final class FilesOptions implements Serializable {
  private static final long serialVersionUID = 1L;
  public static final String LOG_DIRS = "log.dirs";
  static final long DEFAULT_MAX_PARTITION_BYTES = 128L << 20;
  /**
   * A task's read size: small enough to stay in the CPU caches while it is checked and decoded,
   * and below G1's humongous-object size with a 1 GiB heap (16 MiB chunks ran slower).
   */
  static final long DEFAULT_CHUNK_BYTES = 256L << 10;

  final List<String> logDirs;
  final Subscription subscription;
  final OffsetSpec starting;
  final OffsetSpec ending;
  final boolean startingNoMatchIsError; // startingOffsetsByTimestampStrategy=error
  final Long minPartitions;
  final Long maxRecordsPerPartition;
  final long maxPartitionBytes;
  final boolean readCommitted;
  final boolean includeHeaders;
  final boolean failOnDataLoss;
  final int chunkBytes;

  private FilesOptions(Options options) {
    String raw = options.get(LOG_DIRS);
    LinkedHashSet<String> roots = new LinkedHashSet<>();
    if (raw != null) {
      for (String r : raw.split(",", -1)) {
        if (!r.strip().isEmpty()) {
          roots.add(r.strip());
        }
      }
    }
    if (roots.isEmpty()) {
      throw new OptionError(LOG_DIRS, "no directory in '" + (raw == null ? "" : raw) + "'");
    }
    logDirs = List.copyOf(roots);
    for (String name : new String[] {"bootstrap.servers", "kafka.bootstrap.servers"}) {
      if (options.get(name) != null) {
        throw new OptionError(
            LOG_DIRS, "reads the files without a broker; do not give '" + name + "' with it");
      }
    }
    String isolation = options.get("isolation.level");
    if (isolation == null) {
      isolation = options.get("kafka.isolation.level");
    }
    isolation = isolation == null ? "read_committed" : isolation.strip().toLowerCase();
    if (!isolation.equals("read_committed") && !isolation.equals("read_uncommitted")) {
      throw new OptionError(
          "isolation.level", "expected read_committed or read_uncommitted, got '" + isolation + "'");
    }
    readCommitted = isolation.equals("read_committed");
    Long maxBytes = options.longValue("maxPartitionBytes", 1L);
    maxPartitionBytes = maxBytes == null ? DEFAULT_MAX_PARTITION_BYTES : maxBytes;

    subscription = Subscription.parse(options);
    starting = OffsetSpec.parse(options, "starting", Offsets.EARLIEST);
    ending = OffsetSpec.parse(options, "ending", Offsets.LATEST);
    OffsetSpec.checkBatchBounds(starting, ending);
    String strategy = options.get("startingOffsetsByTimestampStrategy");
    strategy = strategy == null ? "error" : strategy.strip().toLowerCase();
    if (!strategy.equals("error") && !strategy.equals("latest")) {
      throw new OptionError(
          "startingOffsetsByTimestampStrategy", "expected error or latest, got '" + strategy + "'");
    }
    startingNoMatchIsError = strategy.equals("error");
    options.longValue("maxOffsetsPerTrigger", 1L); // checked as Spark does, ignored in a batch
    options.longValue("kafkaConsumer.pollTimeoutMs", 1L); // likewise: no broker to poll
    minPartitions = options.longValue("minPartitions", 1L);
    maxRecordsPerPartition = options.longValue("maxRecordsPerPartition", 1L);
    includeHeaders = options.bool("includeHeaders", false);
    failOnDataLoss = options.bool("failOnDataLoss", true);
    Long chunk = options.longValue("fetch.max.bytes", 1024L);
    chunkBytes = (int) Math.min(chunk == null ? DEFAULT_CHUNK_BYTES : chunk, 1L << 30);
  }

  public static FilesOptions parse(Map<String, String> options) {
    return new FilesOptions(new Options(options));
  }
}
