package odradek.files;

import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import odradek.source.OptionError;
import odradek.source.Options;
import odradek.source.ReadOptions;

/**
 * The options of {@code format("odradek-files")}, validated when the table is loaded, so a bad
 * option fails the query before any task runs: the shared batch-read options ({@link
 * ReadOptions}) plus the file reader's own:
 *
 * <ul>
 *   <li>{@code log.dirs}: comma-separated roots (Kafka's {@code log.dirs}); each must be a
 *       directory. {@code bootstrap.servers} with it is refused: the read involves no broker.
 *   <li>{@code maxPartitionBytes}: a task reads at most about this many bytes of one segment
 *       (default 128 MiB, Spark's {@code spark.sql.files.maxPartitionBytes}).
 *   <li>{@code isolation.level}: read_committed leaves out the batches of aborted transactions
 *       listed in {@code .txnindex} files.
 *   <li>{@code fetch.max.bytes}: the size of a task's reads (default 256 KiB; an entry larger
 *       than that is read whole).
 * </ul>
 */
public final class FilesOptions extends ReadOptions {
  private static final long serialVersionUID = 1L;
  public static final String LOG_DIRS = "log.dirs";
  static final long DEFAULT_MAX_PARTITION_BYTES = 128L << 20;
  /**
   * A task's read size: small enough to stay in the CPU caches while it is checked and decoded,
   * and below G1's humongous-object size with a 1 GiB heap (16 MiB chunks ran slower).
   */
  static final long DEFAULT_CHUNK_BYTES = 256L << 10;

  final List<String> logDirs;
  final long maxPartitionBytes;
  final int chunkBytes;

  private FilesOptions(Options options, List<String> logDirs) {
    super(options);
    this.logDirs = logDirs;
    Long maxBytes = options.longValue("maxPartitionBytes", 1L);
    maxPartitionBytes = maxBytes == null ? DEFAULT_MAX_PARTITION_BYTES : maxBytes;
    Long chunk = options.longValue("fetch.max.bytes", 1024L);
    chunkBytes = (int) Math.min(chunk == null ? DEFAULT_CHUNK_BYTES : chunk, 1L << 30);
  }

  public static FilesOptions parse(Map<String, String> given) {
    Options options = new Options(given);
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
    for (String name : new String[] {"bootstrap.servers", "kafka.bootstrap.servers"}) {
      if (options.get(name) != null) {
        throw new OptionError(
            LOG_DIRS, "reads the files without a broker; do not give '" + name + "' with it");
      }
    }
    return new FilesOptions(options, List.copyOf(roots));
  }
}
