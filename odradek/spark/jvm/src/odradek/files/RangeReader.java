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
 *   <li>Each entry is read whole (a larger one than a chunk gets a larger buffer), its CRC
 *       checked; batches of aborted transactions ({@code .txnindex}, planned per task), control
 *       batches and batches wholly outside {@code [fromOffset, untilOffset)} are skipped;
 *       compressed batches are decompressed here. When the read schema needs no per-record
 *       column ({@code count(*)}), a batch wholly inside the range counts its header's record
 *       count and is neither decompressed nor decoded.
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
  private final RecordDecoder decoder = new RecordDecoder();
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
            + (r.untilOffset() - 1) + " are lost.");
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

  private void entry(int size) throws IOException {
    int magic = buf[at + Entries.MAGIC_OFFSET];
    if (magic != 2) {
      legacy(size);
      return;
    }
    long base = Bytes.i64(buf, at);
    if (size < Entries.HEADER_SIZE) {
      throw corrupt("record batch at offset " + base + " is too short");
    }
    String problem = Entries.invalid(buf, at, size);
    if (problem != null) {
      throw corrupt(problem);
    }
    if (base >= r.untilOffset()) {
      done = !exact; // a replacement file is read up to its first entry past the range
      return;
    }
    int attributes = Bytes.i16(buf, at + 21);
    long last = base + Bytes.i32(buf, at + 23);
    int count = Bytes.i32(buf, at + 57);
    if (last < r.fromOffset() || (attributes & 0x20) != 0 || count <= 0) {
      return;
    }
    if ((attributes & 0x10) != 0 && r.isAborted(Bytes.i64(buf, at + 43), base)) {
      return;
    }
    if (!columns.perRecord && base >= r.fromOffset() && last < r.untilOffset()) {
      columns.rows += count;
      return;
    }
    long baseTimestamp = Bytes.i64(buf, at + 27);
    long append = (attributes & 0x08) != 0 ? Bytes.i64(buf, at + 35) : -1;
    int codec = attributes & 0x07;
    try {
      if (codec == 0) {
        decoder.decode(buf, at + Entries.HEADER_SIZE, at + size, count, base, baseTimestamp,
            append, r.fromOffset(), r.untilOffset(), columns);
      } else {
        byte[] body;
        try {
          body = Codecs.decompress(codec, buf, at + Entries.HEADER_SIZE, size - Entries.HEADER_SIZE);
        } catch (IOException e) {
          throw new CorruptRecordException("record batch at offset " + base + ": " + e);
        }
        decoder.decode(body, 0, body.length, count, base, baseTimestamp, append,
            r.fromOffset(), r.untilOffset(), columns);
      }
    } catch (CorruptRecordException e) {
      throw corrupt(e.getMessage());
    }
  }

  private void legacy(int size) throws IOException {
    List<LegacyDecoder.Message> messages;
    try {
      messages = LegacyDecoder.decode(buf, at, size);
    } catch (CorruptRecordException | IOException e) {
      throw corrupt(e.getMessage());
    }
    columns.reserve(messages.size());
    for (LegacyDecoder.Message m : messages) {
      if (m.offset() < r.fromOffset() || m.offset() >= r.untilOffset()) {
        continue;
      }
      int row = columns.rows++;
      put(columns.key, row, m.key());
      put(columns.value, row, m.value());
      if (columns.offset != null) {
        columns.offset.putLong(row, m.offset());
      }
      if (columns.timestamp != null) {
        columns.timestamp.putLong(row, m.timestamp() * 1000);
      }
      if (columns.timestampType != null) {
        columns.timestampType.putInt(row, m.timestampType());
      }
      if (columns.headers != null) {
        columns.headers.putNull(row); // legacy messages have no headers
      }
    }
  }

  private static void put(
      org.apache.spark.sql.execution.vectorized.WritableColumnVector v, int row, byte[] bytes) {
    if (v == null) {
      return;
    }
    if (bytes == null) {
      v.putNull(row);
    } else {
      v.putByteArray(row, bytes, 0, bytes.length);
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
