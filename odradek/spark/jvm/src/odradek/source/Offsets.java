package odradek.source;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * A batch read's offset ranges, by the rules of the Python source ({@code metadata.discover /
 * resolve / batch_ranges}, {@code planning.split_ranges}), which are Spark's Kafka source's:
 *
 * <ol>
 *   <li>{@link #discover}: the subscribed topic-partitions; an unknown subscribed topic or
 *       assigned partition is an error naming the option.
 *   <li>{@link #ranges}: {@code startingOffsets} to {@code endingOffsets} resolved against the
 *       files. A start before the log start is data loss ({@code failOnDataLoss}); an end past
 *       the log end, or before the start, is an option error. Specific offsets must name exactly
 *       the read's partitions. A starting timestamp with no record that recent fails ({@code
 *       startingOffsetsByTimestampStrategy=error}) or starts at the log end ({@code latest}); an
 *       ending one ends at the log end.
 *   <li>{@link #split}: Spark's {@code KafkaOffsetRangeCalculator}: each range first cut into
 *       {@code ceil(size / maxRecordsPerPartition)} equal pieces; then, with {@code minPartitions}
 *       above the number of ranges, each cut in proportion to its size (rounded half up, at
 *       least one). Pieces differ by at most one offset; empty ranges are dropped.
 * </ol>
 */
public final class Offsets {
  public static final long EARLIEST = -2;
  public static final long LATEST = -1;

  private Offsets() {}

  /** Records {@code from <= offset < until} of one topic-partition. */
  public record Range(TopicPartition tp, long from, long until) {
    public long size() {
      return Math.max(0, until - from);
    }
  }

  public static List<TopicPartition> discover(Cluster cluster, Subscription s) {
    Map<String, Integer> topics = cluster.topics();
    TreeSet<TopicPartition> out = new TreeSet<>();
    switch (s.kind) {
      case SUBSCRIBE -> {
        List<String> missing = s.topics.stream().filter(t -> !topics.containsKey(t)).toList();
        if (!missing.isEmpty()) {
          throw new OptionError(
              "subscribe",
              "unknown topic" + (missing.size() > 1 ? "s " : " ") + String.join(", ", missing));
        }
        for (String t : s.topics) {
          for (int p = 0; p < topics.get(t); p++) {
            out.add(new TopicPartition(t, p));
          }
        }
      }
      case PATTERN -> {
        for (Map.Entry<String, Integer> e : topics.entrySet()) {
          if (s.matchesPattern(e.getKey())) {
            for (int p = 0; p < e.getValue(); p++) {
              out.add(new TopicPartition(e.getKey(), p));
            }
          }
        }
      }
      case ASSIGN -> {
        List<String> missing = new ArrayList<>();
        for (TopicPartition tp : s.assigned) {
          if (tp.partition() >= topics.getOrDefault(tp.topic(), 0)) {
            missing.add(tp.toString());
          }
        }
        if (!missing.isEmpty()) {
          throw new OptionError("assign", "unknown topic-partition " + String.join(", ", missing));
        }
        out.addAll(s.assigned);
      }
    }
    return new ArrayList<>(out);
  }

  public static List<Range> ranges(Cluster cluster, ReadOptions o, List<TopicPartition> tps) {
    Map<TopicPartition, Long> earliest = cluster.listOffsets(all(tps, EARLIEST));
    Map<TopicPartition, Long> latest = cluster.listOffsets(all(tps, LATEST));
    Map<TopicPartition, Long> start = resolve(cluster, o.starting, tps, o.startingNoMatchIsError);
    Map<TopicPartition, Long> end = resolve(cluster, o.ending, tps, false);
    List<Range> out = new ArrayList<>();
    for (TopicPartition tp : tps) {
      long low = start.get(tp);
      long high = end.get(tp);
      long first = known(earliest, tp);
      if (low < first) {
        DataLoss.report(
            o.failOnDataLoss,
            o.starting.option + ": " + tp + " starts at " + low + ", but its earliest offset is "
                + first + ".",
            cluster.where());
        low = first;
      }
      long last = known(latest, tp);
      if (high > last) {
        throw new OptionError(
            o.ending.option, tp + " ends at " + high + ", after its latest offset " + last);
      }
      if (high < low) {
        throw new OptionError(
            o.ending.option, tp + " ends at " + high + ", before where it starts (" + low + ")");
      }
      out.add(new Range(tp, low, high));
    }
    return out;
  }

  private static Map<TopicPartition, Long> all(List<TopicPartition> tps, long what) {
    Map<TopicPartition, Long> query = new TreeMap<>();
    for (TopicPartition tp : tps) {
      query.put(tp, what);
    }
    return query;
  }

  private static long known(Map<TopicPartition, Long> answers, TopicPartition tp) {
    Long answer = answers.get(tp);
    if (answer == null) {
      throw new IllegalStateException(tp + ": no log start or end offset (the partition is gone)");
    }
    return answer;
  }

  private static Map<TopicPartition, Long> resolve(
      Cluster cluster, OffsetSpec spec, List<TopicPartition> tps, boolean noMatchIsError) {
    checkNamed(spec, tps);
    Map<TopicPartition, Long> result = new TreeMap<>();
    Map<TopicPartition, Long> ask = new TreeMap<>();
    for (TopicPartition tp : tps) {
      long value;
      if (spec.fixed != null) {
        value = spec.fixed;
      } else if (spec.byTimestamp()) {
        value = spec.timestamp != null ? spec.timestamp : spec.timestamps.get(tp);
      } else {
        value = spec.offsets.get(tp);
      }
      if (value >= 0 && !spec.byTimestamp()) {
        result.put(tp, value);
      } else {
        ask.put(tp, value);
      }
    }
    Map<TopicPartition, Long> answers = ask.isEmpty() ? Map.of() : cluster.listOffsets(ask);
    List<TopicPartition> unmatched = new ArrayList<>();
    for (TopicPartition tp : ask.keySet()) {
      Long answer = answers.get(tp);
      if (answer != null) {
        result.put(tp, answer);
      } else {
        unmatched.add(tp);
      }
    }
    if (!unmatched.isEmpty() && spec.byTimestamp()) {
      if (noMatchIsError) {
        throw new OptionError(
            spec.option,
            "no record at or after the timestamp in "
                + String.join(", ", unmatched.stream().map(TopicPartition::toString).toList())
                + " (set startingOffsetsByTimestampStrategy=latest to start at the end)");
      }
      Map<TopicPartition, Long> latest = cluster.listOffsets(all(unmatched, LATEST));
      for (TopicPartition tp : unmatched) {
        Long end = latest.get(tp);
        result.put(tp, end == null ? 0 : end);
      }
    } else if (!unmatched.isEmpty()) {
      throw new OptionError(
          spec.option,
          "unknown topic-partition "
              + String.join(", ", unmatched.stream().map(TopicPartition::toString).toList()));
    }
    return result;
  }

  /** Spark's rule: specific offsets (or timestamps) name exactly the read's partitions. */
  private static void checkNamed(OffsetSpec spec, List<TopicPartition> tps) {
    if (spec.fixed != null || spec.timestamp != null) {
      return;
    }
    Set<TopicPartition> named = spec.named();
    TreeSet<TopicPartition> unknown = new TreeSet<>(named);
    unknown.removeAll(tps);
    if (!unknown.isEmpty()) {
      throw new OptionError(
          spec.option,
          "names topic-partitions the query does not read: "
              + String.join(", ", unknown.stream().map(TopicPartition::toString).toList()));
    }
    TreeSet<TopicPartition> missing = new TreeSet<>(tps);
    missing.removeAll(named);
    if (!missing.isEmpty()) {
      throw new OptionError(
          spec.option,
          "must give every topic-partition the query reads (-2 earliest, -1 latest); missing "
              + String.join(", ", missing.stream().map(TopicPartition::toString).toList()));
    }
  }

  public static List<Range> split(List<Range> ranges, Long minPartitions, Long maxRecords) {
    List<Range> out = new ArrayList<>();
    for (Range r : ranges) {
      if (r.size() > 0) {
        out.add(r);
      }
    }
    if (maxRecords != null) {
      List<Range> cut = new ArrayList<>();
      for (Range r : out) {
        cut.addAll(cut(r, (r.size() + maxRecords - 1) / maxRecords));
      }
      out = cut;
    }
    if (minPartitions == null || out.size() >= minPartitions) {
      return out;
    }
    long total = 0;
    for (Range r : out) {
      total += r.size();
    }
    List<Range> result = new ArrayList<>();
    for (Range r : out) {
      long parts = Math.max((2 * r.size() * minPartitions + total) / (2 * total), 1);
      result.addAll(cut(r, parts));
    }
    return result;
  }

  /** {@code r} in {@code parts} consecutive non-empty pieces whose sizes differ by at most one. */
  private static List<Range> cut(Range r, long parts) {
    List<Range> out = new ArrayList<>();
    long remaining = r.size();
    long start = r.from();
    for (long part = 0; part < parts; part++) {
      long size = remaining / (parts - part);
      remaining -= size;
      long end = Math.min(start + size, r.until());
      if (end > start) {
        out.add(new Range(r.tp(), start, end));
      }
      start = end;
    }
    return out;
  }
}
