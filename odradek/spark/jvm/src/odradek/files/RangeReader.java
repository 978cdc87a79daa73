package odradek.files;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashSet;
import java.util.List;
import odradek.records.Bytes;
import odradek.records.Columns;
import odradek.records.CorruptRecordException;
import odradek.records.EntryDecoder;
import odradek.source.DataLoss;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * One task: a {@link FileRange} → columnar batches of about 4096 rows (what the Python reader's
 * {@code files_read} did). The segment is opened read-only (no lock, no write) and its planned
 * bytes are mapped read-only in windows of 64 MiB and copied, {@code fetch.max.bytes} (256 KiB) at
 * a time, into one heap buffer that stays in the CPU caches while it is checked and decoded (a
 * plain {@code read} into a heap buffer costs a second copy through a JDK direct buffer). A
 * replacement file (step 2) is read with plain positional reads.
 *
 * <ol>
 *   <li>Open the planned path and check the file is the planned one (device and inode, stat
 *       before and after the open). Retention renames a segment to {@code *.deleted} before it
 *       unlinks it, and a {@code .swap} becomes the live name: those names are tried too.
 *   <li>If no name holds the planned file any more: a live file at the segment's name is a
 *       replacement (compaction keeps offsets, not positions), read from its start, by offsets
 *       only, up to its first entry at or past {@code untilOffset}; no file at all is data loss
 *       ({@code failOnDataLoss}).
 *   <li>Each entry is read whole (a larger one than a chunk gets a larger buffer) and handed to
 *       the shared {@link EntryDecoder} (CRC check, skipping, decompression, decoding; the
 *       broker reader uses the same one), with the aborted transactions of the segment's {@code
 *       .txnindex} (planned per task) to leave out.
 *   <li>The walk must land exactly on {@code endPosition}: an entry that runs past it, or a file
 *       that ends before it, means the file is not what was planned (a {@link
 *       CorruptRecordException} naming the file and position).
 * </ol>
 *
 * Bytes below {@code endPosition} were complete and CRC-valid at planning time and the log is
 * append-only, so a read while the broker appends sees exactly the planned records.
 */
public final class RangeReader implements PartitionReader<ColumnarBatch> {
  private static final int TARGET_ROWS = 4096;
  private static final long WINDOW_BYTES = 64L << 20;

  private final FileRange r;
  private final Columns columns;
  private final EntryDecoder decoder;
  private final EntryDecoder.Aborted aborted;
  private FileChannel channel;
  private boolean exact;
  private long end;
  private boolean done;
  private byte[] buf;
  private int at; // buf[at] is the byte at file position `position`
  private int length; // valid bytes in buf
  private long position;
  private MappedByteBuffer window; // a read-only mapping of [windowStart, + capacity)
  private long windowStart;

  RangeReader(FileRange r, FilesOptions options, StructType schema) {
    this.r = r;
    this.columns = new Columns(schema, r.topic(), r.partition());
    this.decoder = new EntryDecoder(columns);
    this.aborted = (producerId, baseOffset, control) -> r.isAborted(producerId, baseOffset);
    this.buf = new byte[(int) Math.min(options.chunkBytes, Math.max(r.endPosition() - r.startPosition(), 64))];
    try {
      open(options.failOnDataLoss);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private void open(boolean failOnDataLoss) throws IOException {
    Path path = Path.of(r.path());
    String name = path.getFileName().toString();
    Path live = name.endsWith(".swap") ? path.resolveSibling(name.substring(0, name.length() - 5)) : path;
    LinkedHashSet<Path> candidates = new LinkedHashSet<>(
        List.of(path, live, live.resolveSibling(live.getFileName() + ".deleted")));
    for (Path candidate : candidates) {
      FileChannel ch;
      long[] before;
      try {
        before = SegmentFiles.identity(candidate);
        ch = FileChannel.open(candidate, StandardOpenOption.READ);
      } catch (NoSuchFileException e) {
        continue;
      }
      long[] after;
      try {
        after = SegmentFiles.identity(candidate);
      } catch (NoSuchFileException e) {
        after = new long[] {-1, -1, -1};
      }
      boolean planned =
          before[0] == r.device() && before[1] == r.inode()
              && after[0] == r.device() && after[1] == r.inode();
      if (planned || candidate.equals(live)) {
        channel = ch;
        exact = planned;
        position = planned ? r.startPosition() : 0;
        end = planned ? r.endPosition() : ch.size();
        return;
      }
      ch.close();
    }
    DataLoss.report(
        failOnDataLoss,
        r.topic() + "-" + r.partition() + ": segment " + r.path()
            + " was deleted after the read was planned; offsets " + r.fromOffset() + " to "
            + (r.untilOffset() - 1) + " are lost.",
        DataLoss.LOG_DIRS);
    done = true;
  }

  @Override
  public boolean next() throws IOException {
    columns.reset();
    while (!done && columns.rows < TARGET_ROWS) {
      if (!ensure(Entries.LOG_OVERHEAD + 5)) {
        break;
      }
      long size = (long) Bytes.i32(buf, at + 8) + Entries.LOG_OVERHEAD;
      if (size < Entries.LEGACY_MIN_BYTES) {
        throw corrupt("entry size " + size + " is implausible");
      }
      if (position + size > end) {
        if (exact) {
          throw corrupt("an entry of " + size + " bytes runs past the planned end " + end);
        }
        done = true;
        break;
      }
      if (!ensure((int) size)) {
        break;
      }
      entry((int) size);
      at += (int) size;
      position += size;
    }
    return columns.rows > 0;
  }

  /**
   * Whether {@code buf[at, at + bytes)} holds the next bytes of the range, reading more if not.
   * False (and done) at the end of the range.
   */
  private boolean ensure(int bytes) throws IOException {
    if (length - at >= bytes) {
      return true;
    }
    if (position >= end) {
      done = true;
      return false;
    }
    int kept = length - at;
    if (bytes > buf.length) {
      byte[] bigger = new byte[bytes];
      System.arraycopy(buf, at, bigger, 0, kept);
      buf = bigger;
    } else {
      System.arraycopy(buf, at, buf, 0, kept);
    }
    at = 0;
    length = kept;
    long filePosition = position + kept;
    int want = (int) Math.min(buf.length - kept, end - filePosition);
    int got = copy(filePosition, kept, want);
    length += got;
    if (got < want && exact) {
      throw corrupt(
          "the file ends at " + (filePosition + got) + ", before the planned end " + end
              + " (truncated after planning)");
    }
    if (length - at >= bytes) {
      return true;
    }
    if (exact) {
      throw corrupt("an entry is cut short by the planned end " + end);
    }
    done = true; // a replacement file's trailing bytes
    return false;
  }

  /**
   * Copies file bytes [filePosition, + want) into buf[at..]: through a read-only mapping of the
   * planned range (bytes below the planned end never change while the file keeps its inode, and
   * a mapping keeps the inode's pages even if retention unlinks the file meanwhile), or with a
   * positional read for a replacement file, whose size may change. Returns the bytes copied.
   */
  private int copy(long filePosition, int at, int want) throws IOException {
    if (!exact) {
      return Entries.readInto(channel, filePosition, buf, at, want);
    }
    if (window == null
        || filePosition < windowStart
        || filePosition + want > windowStart + window.capacity()) {
      long length = Math.min(Math.max(WINDOW_BYTES, want), end - filePosition);
      long size = channel.size();
      if (size < filePosition + length) {
        throw corrupt(
            "the file ends at " + size + ", before the planned end " + end
                + " (truncated after planning)");
      }
      window = channel.map(FileChannel.MapMode.READ_ONLY, filePosition, length);
      windowStart = filePosition;
    }
    window.get((int) (filePosition - windowStart), buf, at, want);
    return want;
  }

  private void entry(int size) {
    try {
      decoder.decode(buf, at, size, r.fromOffset(), r.untilOffset(), aborted);
    } catch (CorruptRecordException e) {
      throw corrupt(e.getMessage());
    }
    if (buf[at + Entries.MAGIC_OFFSET] == 2 && Bytes.i64(buf, at) >= r.untilOffset()) {
      done = !exact; // a replacement file is read up to its first entry past the range
    }
  }

  private CorruptRecordException corrupt(String problem) {
    return new CorruptRecordException(r.path() + " position " + position + ": " + problem);
  }

  @Override
  public ColumnarBatch get() {
    return columns.batch();
  }

  @Override
  public void close() throws IOException {
    columns.close();
    if (channel != null) {
      channel.close();
    }
  }
}
