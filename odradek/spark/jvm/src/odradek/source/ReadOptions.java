package odradek.source;

import java.io.Serializable;
import java.util.Locale;

/**
 * The batch-read options both JVM readers share, validated when the table is loaded: those of
 * the Python {@code odradek} source (the names and rules of Spark's Kafka source):
 *
 * <ul>
 *   <li>{@code subscribe} / {@code subscribePattern} / {@code assign} ({@link Subscription}).
 *   <li>{@code startingOffsets} / {@code endingOffsets} ({@code earliest|latest|JSON}), {@code
 *       startingTimestamp} / {@code endingTimestamp}, {@code startingOffsetsByTimestamp} /
 *       {@code endingOffsetsByTimestamp}, {@code startingOffsetsByTimestampStrategy} ({@code
 *       error|latest}) ({@link OffsetSpec}).
 *   <li>{@code minPartitions}, {@code maxRecordsPerPartition}: more tasks ({@link Offsets#split}).
 *   <li>{@code isolation.level} ({@code kafka.isolation.level}): {@code read_committed}
 *       (default) leaves out the batches of aborted transactions; {@code read_uncommitted} keeps
 *       them. Control batches are never rows.
 *   <li>{@code includeHeaders}, {@code failOnDataLoss} (default true).
 *   <li>{@code maxOffsetsPerTrigger}, {@code kafkaConsumer.pollTimeoutMs}: checked as Spark
 *       checks them; a batch read ignores the first (each reader says what it does with the
 *       second).
 * </ul>
 *
 * Each reader's options extend this class with their own (where the records are, read sizes).
 */
public class ReadOptions implements Serializable {
  private static final long serialVersionUID = 1L;

  public final Subscription subscription;
  public final OffsetSpec starting;
  public final OffsetSpec ending;
  public final boolean startingNoMatchIsError; // startingOffsetsByTimestampStrategy=error
  public final Long minPartitions;
  public final Long maxRecordsPerPartition;
  public final boolean readCommitted;
  public final boolean includeHeaders;
  public final boolean failOnDataLoss;
  public final Long pollTimeoutMs; // null when not given

  protected ReadOptions(Options options) {
    String isolation = options.get("isolation.level");
    if (isolation == null) {
      isolation = options.get("kafka.isolation.level");
    }
    isolation = isolation == null ? "read_committed" : isolation.strip().toLowerCase(Locale.ROOT);
    if (!isolation.equals("read_committed") && !isolation.equals("read_uncommitted")) {
      throw new OptionError(
          "isolation.level", "expected read_committed or read_uncommitted, got '" + isolation + "'");
    }
    readCommitted = isolation.equals("read_committed");
    subscription = Subscription.parse(options);
    starting = OffsetSpec.parse(options, "starting", Offsets.EARLIEST);
    ending = OffsetSpec.parse(options, "ending", Offsets.LATEST);
    OffsetSpec.checkBatchBounds(starting, ending);
    String strategy = options.get("startingOffsetsByTimestampStrategy");
    strategy = strategy == null ? "error" : strategy.strip().toLowerCase(Locale.ROOT);
    if (!strategy.equals("error") && !strategy.equals("latest")) {
      throw new OptionError(
          "startingOffsetsByTimestampStrategy", "expected error or latest, got '" + strategy + "'");
    }
    startingNoMatchIsError = strategy.equals("error");
    options.longValue("maxOffsetsPerTrigger", 1L); // checked as Spark does, ignored in a batch
    pollTimeoutMs = options.longValue("kafkaConsumer.pollTimeoutMs", 1L);
    minPartitions = options.longValue("minPartitions", 1L);
    maxRecordsPerPartition = options.longValue("maxRecordsPerPartition", 1L);
    includeHeaders = options.bool("includeHeaders", false);
    failOnDataLoss = options.bool("failOnDataLoss", true);
  }
}
