package odradek.files;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import odradek.records.RecordDecoder;
import odradek.source.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What one partition directory holds now, fixed once on the driver (the Python {@code
 * files_layout}):
 *
 * <ol>
 *   <li>The segments to read ({@link SegmentFiles#list}: Kafka's recovery rules for {@code
 *       .deleted} / {@code .cleaned} / {@code .swap} files, applied to the listing only).
 *   <li>Each segment's readable end: from its last offset index entry that agrees with the log
 *       (or from position 0), every entry is read whole and its CRC checked; the first
 *       incomplete or invalid one ends the segment's data. A batch a running broker is still
 *       writing is thus left out wholly, and records appended after planning are never read
 *       (each task stops at its planned end position).
 *   <li>As Kafka's recovery does, a segment whose data ends before its file does (a torn tail)
 *       ends the log: later segments are left out, with a warning.
 *   <li>Log start offset = max(first segment's base offset, the root's {@code
 *       log-start-offset-checkpoint} entry); log end offset = one past the last readable offset.
 *   <li>Aborted transactions: the {@code .txnindex} entries of every segment (Kafka-written logs).
 * </ol>
 */
final class PartitionLog {
  private static final Logger LOG = LoggerFactory.getLogger(PartitionLog.class);
  static final String LOG_START_CHECKPOINT = "log-start-offset-checkpoint";

  /** A segment's readable part: offsets [base, nextOffset) in bytes [0, endPosition). */
  record Span(SegmentFiles.Listed file, long nextOffset, long endPosition, long[][] offsetIndex) {}

  final TopicPartition tp;
  final List<Span> spans;
  final long logStartOffset;
  final long logEndOffset;
  final List<SegmentFiles.Aborted> aborted;

  private PartitionLog(
      TopicPartition tp, List<Span> spans, long start, long end, List<SegmentFiles.Aborted> aborted) {
    this.tp = tp;
    this.spans = spans;
    this.logStartOffset = start;
    this.logEndOffset = end;
    this.aborted = aborted;
  }

  static PartitionLog load(TopicPartition tp, Path root) throws IOException {
    Path dir = root.resolve(tp.toString());
    List<Span> spans = new ArrayList<>();
    List<SegmentFiles.Aborted> aborted = new ArrayList<>();
    List<SegmentFiles.Listed> segments = SegmentFiles.list(dir);
    for (int i = 0; i < segments.size(); i++) {
      SegmentFiles.Listed segment = segments.get(i);
      Span span;
      boolean torn;
      try (FileChannel ch = FileChannel.open(segment.path(), StandardOpenOption.READ)) {
        long[][] index = SegmentFiles.offsetIndex(segment.sibling(".index"), segment.baseOffset());
        long size = ch.size();
        long start = index.length > 0 ? hintPosition(ch, index, index[index.length - 1][0], size) : 0;
        Entries.Readable readable = Entries.readableEnd(ch, start, size);
        if (start > 0 && readable.last() == null) { // the index does not fit the log
          readable = Entries.readableEnd(ch, 0, size);
        }
        long end = readable.end();
        long next =
            readable.last() == null ? segment.baseOffset() : readable.last().lastOffset() + 1;
        long[][] kept = Arrays.stream(index).filter(e -> e[1] < end).toArray(long[][]::new);
        span = new Span(segment, Math.max(next, segment.baseOffset()), end, kept);
        torn = end < size;
      } catch (NoSuchFileException gone) { // retention deleted it since the listing
        continue;
      }
      spans.add(span);
      aborted.addAll(SegmentFiles.abortedTransactions(segment.sibling(".txnindex")));
      if (torn && i + 1 < segments.size()) {
        LOG.warn(
            "{}: invalid bytes after position {}; the {} later segment(s) are left out, "
                + "as Kafka's recovery would delete them",
            segment.path(),
            span.endPosition(),
            segments.size() - i - 1);
        break;
      }
    }
    long start = spans.isEmpty() ? 0 : spans.get(0).file().baseOffset();
    Long checkpoint = SegmentFiles.checkpointOffset(root.resolve(LOG_START_CHECKPOINT), tp);
    if (checkpoint != null) {
      start = Math.max(start, checkpoint);
    }
    long end = spans.isEmpty() ? start : spans.get(spans.size() - 1).nextOffset();
    return new PartitionLog(tp, List.copyOf(spans), Math.min(start, end), end, List.copyOf(aborted));
  }

  /**
   * Where a scan for {@code offset} may start: the position of the largest index entry with an
   * offset at most {@code offset}, if the entry header there starts at or below that entry's
   * offset (Kafka indexes a batch's last offset against the position of its first batch); else 0.
   */
  static long hintPosition(FileChannel ch, long[][] index, long offset, long end)
      throws IOException {
    int i = -1;
    int lo = 0;
    int hi = index.length - 1;
    while (lo <= hi) {
      int mid = (lo + hi) >>> 1;
      if (index[mid][0] <= offset) {
        i = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    if (i < 0 || index[i][1] >= end) {
      return 0;
    }
    Entries.Entry head = Entries.first(ch, index[i][1], end);
    return head != null && head.baseOffset() <= index[i][0] ? index[i][1] : 0;
  }

  /** The first entry in [0, end) whose last offset is at least {@code offset}, or null. */
  static Entries.Entry locate(FileChannel ch, long[][] index, long offset, long end)
      throws IOException {
    long position = hintPosition(ch, index, offset, end);
    while (true) {
      List<Entries.Entry> chunk = Entries.scan(ch, position, end, 1024);
      if (chunk.isEmpty()) {
        return null;
      }
      for (Entries.Entry e : chunk) {
        if (e.lastOffset() >= offset) {
          return e;
        }
      }
      position = chunk.get(chunk.size() - 1).nextPosition();
    }
  }

  /** The first offset at or after the log start whose record timestamp is at least {@code ts}. */
  Long offsetForTime(long timestampMs) throws IOException {
    for (Span span : spans) {
      if (span.nextOffset() <= logStartOffset) {
        continue;
      }
      try (FileChannel ch = FileChannel.open(span.file().path(), StandardOpenOption.READ)) {
        Long found = firstAtTimestamp(ch, span, timestampMs);
        if (found != null) {
          return found;
        }
      }
    }
    return null;
  }

  /**
   * Kafka's ListOffsets by time within one segment: the time index gives where to start when its
   * entry agrees with the log (the batch holding its offset has its timestamp as max timestamp);
   * otherwise the scan starts at the log start.
   */
  private Long firstAtTimestamp(FileChannel ch, Span span, long timestampMs) throws IOException {
    SegmentFiles.Listed file = span.file();
    long startOffset = logStartOffset;
    long[][] times = SegmentFiles.timeIndex(file.sibling(".timeindex"), file.baseOffset());
    int i = -1;
    for (int j = 0; j < times.length && times[j][0] <= timestampMs; j++) {
      i = j;
    }
    if (i >= 0) {
      Entries.Entry hint = locate(ch, span.offsetIndex(), times[i][1], span.endPosition());
      if (hint != null && hint.baseOffset() <= times[i][1] && hint.maxTimestamp() == times[i][0]) {
        startOffset = Math.max(startOffset, hint.baseOffset());
      }
    }
    Entries.Entry found = locate(ch, span.offsetIndex(), startOffset, span.endPosition());
    if (found == null) {
      return null;
    }
    long position = found.position();
    while (true) {
      List<Entries.Entry> chunk = Entries.scan(ch, position, span.endPosition(), 1024);
      if (chunk.isEmpty()) {
        return null;
      }
      for (Entries.Entry e : chunk) {
        if (e.maxTimestamp() < timestampMs || e.lastOffset() < logStartOffset) {
          continue;
        }
        byte[] data = Entries.read(ch, e.position(), e.sizeBytes());
        Long hit = RecordDecoder.firstAtTimestamp(data, timestampMs, logStartOffset);
        if (hit != null) {
          return hit;
        }
      }
      position = chunk.get(chunk.size() - 1).nextPosition();
    }
  }
}
