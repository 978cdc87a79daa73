package odradek.source;

import java.io.Serializable;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * Where a read starts or ends, before it is resolved against the files: exactly one form of
 * {@code fixed} (EARLIEST or LATEST for every partition), {@code offsets} (per partition, -2/-1
 * allowed), {@code timestamp} (one for all partitions) or {@code timestamps} (per partition).
 * {@code option} is the name errors report. As in Spark, a timestamp option wins over an
 * offsets option: {@code <which>Timestamp}, then {@code <which>OffsetsByTimestamp}, then {@code
 * <which>Offsets}.
 */
public final class OffsetSpec implements Serializable {
  private static final long serialVersionUID = 1L;

  final String option;
  final Long fixed;
  final Map<TopicPartition, Long> offsets;
  final Long timestamp;
  final Map<TopicPartition, Long> timestamps;

  private OffsetSpec(
      String option,
      Long fixed,
      Map<TopicPartition, Long> offsets,
      Long timestamp,
      Map<TopicPartition, Long> timestamps) {
    this.option = option;
    this.fixed = fixed;
    this.offsets = offsets;
    this.timestamp = timestamp;
    this.timestamps = timestamps;
  }

  boolean byTimestamp() {
    return timestamp != null || !timestamps.isEmpty();
  }

  Set<TopicPartition> named() {
    Set<TopicPartition> all = new HashSet<>(offsets.keySet());
    all.addAll(timestamps.keySet());
    return all;
  }

  static OffsetSpec parse(Options options, String which, long fallback) {
    String tsName = which + "Timestamp";
    Long ts = options.longValue(tsName, 0L);
    if (ts != null) {
      return new OffsetSpec(tsName, null, Map.of(), ts, Map.of());
    }
    String byTsName = which + "OffsetsByTimestamp";
    String raw = options.get(byTsName);
    if (raw != null) {
      return new OffsetSpec(byTsName, null, Map.of(), null, Json.offsets(byTsName, raw, true));
    }
    String name = which + "Offsets";
    raw = options.get(name);
    if (raw == null) {
      return new OffsetSpec(name, fallback, Map.of(), null, Map.of());
    }
    String text = raw.strip();
    if (text.equalsIgnoreCase("earliest")) {
      return new OffsetSpec(name, Offsets.EARLIEST, Map.of(), null, Map.of());
    }
    if (text.equalsIgnoreCase("latest")) {
      return new OffsetSpec(name, Offsets.LATEST, Map.of(), null, Map.of());
    }
    if (!text.startsWith("{")) {
      throw new OptionError(
          name,
          "expected 'earliest', 'latest' or JSON like {\"topic\":{\"0\":23}}, got '" + raw + "'");
    }
    return new OffsetSpec(name, null, Json.offsets(name, text, false), null, Map.of());
  }

  /** Spark's rules: a batch read neither starts at latest nor ends at earliest. */
  static void checkBatchBounds(OffsetSpec starting, OffsetSpec ending) {
    if (starting.fixed != null && starting.fixed == Offsets.LATEST) {
      throw new OptionError(starting.option, "cannot be 'latest' for a batch query");
    }
    for (Map.Entry<TopicPartition, Long> e : starting.offsets.entrySet()) {
      if (e.getValue() == Offsets.LATEST) {
        throw new OptionError(
            starting.option, e.getKey() + " cannot be latest (-1) for a batch query");
      }
    }
    if (ending.fixed != null && ending.fixed == Offsets.EARLIEST) {
      throw new OptionError(ending.option, "cannot be 'earliest' for a batch query");
    }
    for (Map.Entry<TopicPartition, Long> e : ending.offsets.entrySet()) {
      if (e.getValue() == Offsets.EARLIEST) {
        throw new OptionError(
            ending.option, e.getKey() + " cannot be earliest (-2) for a batch query");
      }
    }
  }
}
