package odradek.files;

import java.io.IOException;
import java.io.Serializable;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import odradek.records.Bytes;
import odradek.source.TopicPartition;

/**
 * The files of a partition directory, read-only (the Python {@code storage.log_view}): this
 * never takes {@code .lock}, never creates, writes, truncates or maps a file.
 *
 * <pre>
 *   &lt;base&gt;.log        entries back to back ({@link Entries})
 *   &lt;base&gt;.index      8-byte entries:  relative offset int32 | position int32
 *   &lt;base&gt;.timeindex 12-byte entries:  timestamp int64       | relative offset int32
 *   &lt;base&gt;.txnindex  34-byte entries:  version int16 (0) | producerId int64 | firstOffset
 *                     int64 | lastOffset int64 | lastStableOffset int64 (aborted transactions)
 * </pre>
 *
 * Which segments count (Kafka's recovery rules, applied to the listing only): {@code .deleted},
 * {@code .cleaned} and {@code .tmp} files are ignored; {@code .swap} segments replace the live
 * segments of their offset range, unless a {@code .cleaned} at or below them says their
 * cleaning pass never finished. Indexes are derived data: only the longest strictly increasing
 * prefix of an index is kept (a preallocated index ends in zero entries), and a missing index
 * means a scan.
 */
final class SegmentFiles {
  private static final Pattern SEGMENT = Pattern.compile("(\\d{20})\\.log(\\.swap|\\.cleaned)?");
  private static final Pattern PARTITION_DIR =
      Pattern.compile("([a-zA-Z0-9._-]+)-(0|[1-9][0-9]{0,9})");

  private SegmentFiles() {}

  /** One segment as listed: the file to read, its base offset and its identity. */
  record Listed(Path path, long baseOffset, long device, long inode, long sizeBytes)
      implements Serializable {
    Path sibling(String suffix) {
      return path.resolveSibling(path.getFileName().toString().replaceFirst("\\.log", suffix));
    }
  }

  /** An aborted transaction of a {@code .txnindex}: its producer and its offsets. */
  record Aborted(long producerId, long firstOffset, long lastOffset) implements Serializable {}

  /** {@code (topic, partition)} for a live partition directory name, or null. */
  static TopicPartition parsePartitionDir(String name) {
    Matcher m = PARTITION_DIR.matcher(name);
    if (!m.matches()) {
      return null;
    }
    String topic = m.group(1);
    long partition = Long.parseLong(m.group(2));
    if (topic.equals(".") || topic.equals("..") || topic.length() > 249 || partition > 0x7fffffffL) {
      return null;
    }
    return new TopicPartition(topic, (int) partition);
  }

  /** The device and inode of {@code path} ({@code unix:} attributes). */
  static long[] identity(Path path) throws IOException {
    Map<String, Object> a = Files.readAttributes(path, "unix:dev,ino,size");
    return new long[] {
      ((Number) a.get("dev")).longValue(),
      ((Number) a.get("ino")).longValue(),
      ((Number) a.get("size")).longValue()
    };
  }

  /** The segments a reader should read, in base offset order. */
  static List<Listed> list(Path dir) throws IOException {
    TreeMap<Long, Path> live = new TreeMap<>();
    TreeMap<Long, Path> swaps = new TreeMap<>();
    long minCleaned = Long.MAX_VALUE;
    try (var names = Files.list(dir)) {
      for (Path p : (Iterable<Path>) names::iterator) {
        Matcher m = SEGMENT.matcher(p.getFileName().toString());
        if (!m.matches()) {
          continue;
        }
        long base = Long.parseLong(m.group(1));
        if (m.group(2) == null) {
          live.put(base, p);
        } else if (m.group(2).equals(".swap")) {
          swaps.put(base, p);
        } else {
          minCleaned = Math.min(minCleaned, base);
        }
      }
    }
    if (minCleaned != Long.MAX_VALUE) { // an unfinished cleaning pass: its swaps are not complete
      swaps.tailMap(minCleaned, true).clear();
    }
    if (!swaps.isEmpty()) {
      long low = swaps.firstKey();
      long high = Long.MIN_VALUE;
      for (Map.Entry<Long, Path> e : swaps.entrySet()) {
        high = Math.max(high, nextOffset(e.getValue(), e.getKey()));
      }
      live.subMap(low, true, Math.max(low, high), false).clear();
      live.putAll(swaps);
    }
    List<Listed> out = new ArrayList<>();
    for (Map.Entry<Long, Path> e : live.entrySet()) {
      try {
        long[] id = identity(e.getValue());
        out.add(new Listed(e.getValue(), e.getKey(), id[0], id[1], id[2]));
      } catch (NoSuchFileException gone) { // deleted (retention) since the listing
      }
    }
    return out;
  }

  /** One past the last offset of a complete segment file (a {@code .swap}). */
  private static long nextOffset(Path path, long baseOffset) throws IOException {
    try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ)) {
      long next = baseOffset;
      long position = 0;
      long size = ch.size();
      while (true) {
        List<Entries.Entry> batch = Entries.scan(ch, position, size, 4096);
        if (batch.isEmpty()) {
          return next;
        }
        Entries.Entry last = batch.get(batch.size() - 1);
        next = last.lastOffset() + 1;
        position = last.nextPosition();
      }
    }
  }

  private static byte[] readSmall(Path path) throws IOException {
    try {
      return Files.readAllBytes(path);
    } catch (NoSuchFileException e) {
      return new byte[0];
    }
  }

  /** {@code [offset, position]} pairs of an {@code .index}: its strictly increasing prefix. */
  static long[][] offsetIndex(Path path, long baseOffset) throws IOException {
    byte[] data = readSmall(path);
    List<long[]> out = new ArrayList<>();
    int lastRelative = -1;
    int lastPosition = -1;
    for (int at = 0; at + 8 <= data.length; at += 8) {
      int relative = Bytes.i32(data, at);
      int position = Bytes.i32(data, at + 4);
      if (relative <= lastRelative || position <= lastPosition) {
        break;
      }
      lastRelative = relative;
      lastPosition = position;
      if (relative == 0 && position == 0) {
        continue; // a zero first slot (preallocated) says nothing
      }
      out.add(new long[] {baseOffset + relative, position});
    }
    return out.toArray(new long[0][]);
  }

  /**
   * {@code [timestamp, offset]} pairs of a {@code .timeindex}: its prefix with strictly
   * increasing timestamps and non-decreasing offsets.
   */
  static long[][] timeIndex(Path path, long baseOffset) throws IOException {
    byte[] data = readSmall(path);
    List<long[]> out = new ArrayList<>();
    long lastTimestamp = -1;
    int lastRelative = -1;
    for (int at = 0; at + 12 <= data.length; at += 12) {
      long timestamp = Bytes.i64(data, at);
      int relative = Bytes.i32(data, at + 8);
      if (timestamp <= lastTimestamp || relative < lastRelative || relative < 0) {
        break;
      }
      lastTimestamp = timestamp;
      lastRelative = relative;
      if (timestamp == 0 && relative == 0) {
        continue;
      }
      out.add(new long[] {timestamp, baseOffset + relative});
    }
    return out.toArray(new long[0][]);
  }

  /** The entries of a {@code .txnindex} up to the first partial or unknown-version one. */
  static List<Aborted> abortedTransactions(Path path) throws IOException {
    byte[] data = readSmall(path);
    List<Aborted> out = new ArrayList<>();
    for (int at = 0; at + 34 <= data.length; at += 34) {
      long first = Bytes.i64(data, at + 10);
      long last = Bytes.i64(data, at + 18);
      if (Bytes.i16(data, at) != 0 || last < first) {
        break;
      }
      out.add(new Aborted(Bytes.i64(data, at + 2), first, last));
    }
    return out;
  }

  /**
   * The entry for {@code tp} in an offset checkpoint ({@code "0\n<count>\n<topic> <partition>
   * <offset>\n..."}), or null when the file is missing, malformed or has no such entry (the
   * Python reader ignores a checkpoint it cannot read).
   */
  static Long checkpointOffset(Path path, TopicPartition tp) {
    List<String> lines;
    try {
      lines = List.of(new String(Files.readAllBytes(path), StandardCharsets.UTF_8).split("\\r?\\n"));
    } catch (IOException e) {
      return null;
    }
    if (lines.size() < 2 || !lines.get(0).equals("0")) {
      return null;
    }
    Long found = null;
    try {
      int count = Integer.parseInt(lines.get(1));
      if (count != lines.size() - 2) {
        return null;
      }
      for (String line : lines.subList(2, lines.size())) {
        String[] f = line.split(" ");
        if (f.length != 3) {
          return null;
        }
        long offset = Long.parseLong(f[2]);
        if (offset < 0) {
          return null;
        }
        if (f[0].equals(tp.topic()) && Integer.parseInt(f[1]) == tp.partition()) {
          found = offset;
        }
      }
    } catch (NumberFormatException e) {
      return null;
    }
    return found;
  }
}
