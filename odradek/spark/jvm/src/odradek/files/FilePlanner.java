package odradek.files;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import odradek.source.Offsets;

/**
 * Offset ranges → one task per segment or byte range of a segment (the Python {@code
 * files_plan}). Each range is cut where its partition's segments begin, and a segment part
 * larger than {@code maxPartitionBytes} is cut again at offset index entries that agree with
 * the log. Invariants:
 *
 * <ol>
 *   <li>Tasks of one partition have disjoint offset ranges that together cover the planned
 *       range, so no record is read twice and none is missed, even if a task has to fall back to
 *       reading by offsets (a segment replaced by compaction, {@link RangeReader}).
 *   <li>{@code endPosition} never passes the segment's readable end fixed at planning ({@link
 *       PartitionLog}), and starts and ends are entry boundaries (a task checks that its walk
 *       lands exactly on {@code endPosition}).
 *   <li>A task carries the aborted transactions that overlap its offsets, so it can skip their
 *       batches without reading any other file.
 * </ol>
 */
final class FilePlanner {
  private FilePlanner() {}

  static List<FileRange> plan(PartitionLog log, Offsets.Range range, long maxBytes, boolean committed)
      throws IOException {
    List<FileRange> out = new ArrayList<>();
    List<PartitionLog.Span> spans = log.spans;
    for (int i = 0; i < spans.size(); i++) {
      PartitionLog.Span span = spans.get(i);
      long low = Math.max(range.from(), span.file().baseOffset());
      long high = Math.min(range.until(), span.nextOffset());
      if (i + 1 < spans.size()) {
        high = Math.min(high, spans.get(i + 1).file().baseOffset());
      }
      if (high > low) {
        segmentRanges(log, span, low, high, maxBytes, committed, out);
      }
    }
    return out;
  }

  /** Offsets [low, high) of one segment, cut into pieces of about {@code maxBytes}. */
  private static void segmentRanges(
      PartitionLog log,
      PartitionLog.Span span,
      long low,
      long high,
      long maxBytes,
      boolean committed,
      List<FileRange> out)
      throws IOException {
    long[][] index = span.offsetIndex();
    long start;
    long end;
    List<long[]> cuts;
    try (FileChannel ch = FileChannel.open(span.file().path(), StandardOpenOption.READ)) {
      Entries.Entry first = PartitionLog.locate(ch, index, low, span.endPosition());
      if (first == null) {
        return;
      }
      start = first.position();
      if (high >= span.nextOffset()) {
        end = span.endPosition();
      } else {
        Entries.Entry after = PartitionLog.locate(ch, index, high, span.endPosition());
        if (after == null) {
          end = span.endPosition();
        } else if (after.magic() != 2 || after.baseOffset() < high) {
          // high may fall inside this entry (a legacy wrapper names only its last offset):
          // read it whole, the task filters by offset
          end = after.nextPosition();
        } else {
          end = after.position();
        }
      }
      cuts = cuts(ch, index, start, end, low, high, maxBytes);
    }
    List<long[]> bounds = new ArrayList<>();
    bounds.add(new long[] {start, low});
    bounds.addAll(cuts);
    bounds.add(new long[] {end, high});
    for (int i = 0; i + 1 < bounds.size(); i++) {
      long from = bounds.get(i)[1];
      long until = bounds.get(i + 1)[1];
      if (until > from) {
        out.add(
            new FileRange(
                log.tp.topic(),
                log.tp.partition(),
                span.file().path().toString(),
                span.file().baseOffset(),
                span.file().device(),
                span.file().inode(),
                from,
                until,
                bounds.get(i)[0],
                bounds.get(i + 1)[0],
                committed ? aborted(log, from, until) : new long[0]));
      }
    }
  }

  /**
   * {@code [position, base offset]} of the entries to cut [start, end) at, about every {@code
   * maxBytes}: index positions whose entry header agrees with the index.
   */
  private static List<long[]> cuts(
      FileChannel ch, long[][] index, long start, long end, long low, long high, long maxBytes)
      throws IOException {
    List<long[]> cuts = new ArrayList<>();
    if (end - start <= maxBytes) {
      return cuts;
    }
    long pieces = (end - start + maxBytes - 1) / maxBytes;
    double target = (double) (end - start) / pieces;
    double nextCut = start + target;
    for (long[] entry : index) {
      long position = entry[1];
      if (position <= start || position >= end || position < nextCut) {
        continue;
      }
      Entries.Entry head = Entries.first(ch, position, end);
      if (head == null || head.magic() != 2 || head.baseOffset() > entry[0]) {
        continue; // an index entry that does not fit the log: no cut there
      }
      long base = head.baseOffset();
      if (!(low < base && base < high) || (!cuts.isEmpty() && base <= cuts.get(cuts.size() - 1)[1])) {
        continue;
      }
      cuts.add(new long[] {position, base});
      nextCut = position + target;
    }
    return cuts;
  }

  private static long[] aborted(PartitionLog log, long low, long high) {
    List<SegmentFiles.Aborted> hits = new ArrayList<>();
    for (SegmentFiles.Aborted t : log.aborted) {
      if (t.lastOffset() >= low && t.firstOffset() < high) {
        hits.add(t);
      }
    }
    long[] flat = new long[hits.size() * 3];
    for (int i = 0; i < hits.size(); i++) {
      flat[3 * i] = hits.get(i).producerId();
      flat[3 * i + 1] = hits.get(i).firstOffset();
      flat[3 * i + 2] = hits.get(i).lastOffset();
    }
    return flat;
  }
}
