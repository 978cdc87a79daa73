package odradek.files;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import odradek.source.Cluster;
import odradek.source.DataLoss;
import odradek.source.Offsets;
import odradek.source.OptionError;
import odradek.source.TopicPartition;

/**
 * The driver's view of {@code log.dirs}: which partitions exist (one directory {@code
 * <topic>-<partition>} per partition, in exactly one root), and each one's {@link
 * PartitionLog}, loaded once per planning. It answers the questions the planning rules ask
 * (topics and partition counts, ListOffsets) from the files.
 */
final class LogDirs implements Cluster {
  private final List<Path> roots = new ArrayList<>();
  private final TreeMap<TopicPartition, Path> where = new TreeMap<>();
  private final Map<TopicPartition, PartitionLog> logs = new HashMap<>();

  LogDirs(List<String> dirs) {
    for (String dir : dirs) {
      Path root = Path.of(dir);
      if (!Files.isDirectory(root)) {
        throw new OptionError(FilesOptions.LOG_DIRS, "'" + dir + "' is not a directory");
      }
      roots.add(root);
      try (var names = Files.list(root)) {
        for (Path p : (Iterable<Path>) names.sorted()::iterator) {
          TopicPartition tp = SegmentFiles.parsePartitionDir(p.getFileName().toString());
          if (tp == null || !Files.isDirectory(p)) {
            continue;
          }
          if (where.containsKey(tp)) {
            throw new OptionError(
                FilesOptions.LOG_DIRS, tp + " is in two roots: " + where.get(tp) + " and " + root);
          }
          where.put(tp, root);
        }
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  boolean has(TopicPartition tp) {
    return where.containsKey(tp);
  }

  PartitionLog partitionLog(TopicPartition tp) {
    PartitionLog log = logs.get(tp);
    if (log == null) {
      Path root = where.get(tp);
      if (root == null) {
        List<String> names = roots.stream().map(Path::toString).toList();
        throw new OptionError(
            FilesOptions.LOG_DIRS, "no directory " + tp + " under " + String.join(", ", names));
      }
      try {
        log = PartitionLog.load(tp, root);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      logs.put(tp, log);
    }
    return log;
  }

  /** Every topic and its number of partitions (one past its highest partition directory). */
  @Override
  public Map<String, Integer> topics() {
    Map<String, Integer> counts = new TreeMap<>();
    for (TopicPartition tp : where.keySet()) {
      counts.merge(tp.topic(), tp.partition() + 1, Math::max);
    }
    return counts;
  }

  /**
   * ListOffsets: {@link Offsets#EARLIEST}, {@link Offsets#LATEST}, else the first offset whose
   * record timestamp is at least the value (null when none is that recent, or no directory).
   */
  @Override
  public Map<TopicPartition, Long> listOffsets(Map<TopicPartition, Long> query) {
    Map<TopicPartition, Long> answers = new HashMap<>();
    for (Map.Entry<TopicPartition, Long> e : query.entrySet()) {
      answers.put(e.getKey(), listOffset(e.getKey(), e.getValue()));
    }
    return answers;
  }

  @Override
  public String where() {
    return DataLoss.LOG_DIRS;
  }

  Long listOffset(TopicPartition tp, long what) {
    if (!where.containsKey(tp)) {
      return null;
    }
    PartitionLog log = partitionLog(tp);
    if (what == Offsets.EARLIEST) {
      return log.logStartOffset;
    }
    if (what == Offsets.LATEST) {
      return log.logEndOffset;
    }
    try {
      return log.offsetForTime(what);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
