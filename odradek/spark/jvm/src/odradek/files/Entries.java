package odradek.files;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.util.ArrayList;
import java.util.List;
import odradek.records.Batches;
import odradek.records.Bytes;

/**
 * Walking the entries of a {@code .log} file by position (the Python {@code storage.scan}); the
 * entry layouts are {@link Batches}'s.
 *
 * <p>{@link #scan} reads headers only (lookups, planning); {@link #readableEnd} reads and checks
 * every entry in full and stops at the first incomplete or invalid one. Reads are positional
 * ({@code FileChannel.read(buffer, position)}): nothing here moves a file pointer, writes or
 * maps a file.
 */
final class Entries {
  static final int LOG_OVERHEAD = Batches.LOG_OVERHEAD;
  static final int HEADER_SIZE = Batches.HEADER_SIZE;
  static final int MAGIC_OFFSET = Batches.MAGIC_OFFSET;
  static final int LEGACY_MIN_BYTES = Batches.LEGACY_MIN_BYTES;
  private static final int FIRST_CHUNK_BYTES = 8 << 10;
  private static final int CHUNK_BYTES = 64 << 10;
  private static final int VALIDATE_CHUNK_BYTES = 8 << 20;

  private Entries() {}

  /** Where one entry sits in a {@code .log}, and the offsets and timestamp it covers. */
  record Entry(
      long position, long baseOffset, long lastOffset, int sizeBytes, long maxTimestamp, int magic) {
    long nextPosition() {
      return position + sizeBytes;
    }
  }

  /** Reads {@code length} bytes at {@code position} (fewer at the end of the file). */
  static byte[] read(FileChannel channel, long position, int length) throws IOException {
    byte[] out = new byte[length];
    int n = readInto(channel, position, out, 0, length);
    return n == length ? out : java.util.Arrays.copyOf(out, n);
  }

  /** Fills {@code out[at, at + length)} from {@code position}; the bytes read (short at EOF). */
  static int readInto(FileChannel channel, long position, byte[] out, int at, int length)
      throws IOException {
    ByteBuffer buffer = ByteBuffer.wrap(out, at, length);
    int total = 0;
    while (buffer.hasRemaining()) {
      int n = channel.read(buffer, position + total);
      if (n < 0) {
        break;
      }
      total += n;
    }
    return total;
  }

  /** The header of the entry at {@code buf[at]}; the buffer holds its first 61 bytes (v2). */
  static Entry header(byte[] buf, int at, long position) {
    int magic = buf[at + MAGIC_OFFSET];
    long base = Bytes.i64(buf, at);
    int size = Bytes.i32(buf, at + 8) + LOG_OVERHEAD;
    if (magic == 2) {
      long last = base + Bytes.i32(buf, at + 23);
      return new Entry(position, base, last, size, Bytes.i64(buf, at + 35), 2);
    }
    long timestamp = -1;
    if (magic == 1 && buf.length - at >= LOG_OVERHEAD + 14) {
      timestamp = Bytes.i64(buf, at + LOG_OVERHEAD + 6);
    }
    return new Entry(position, base, base, size, timestamp, magic);
  }

  /**
   * Entry headers in {@code [start, end)}, unvalidated. Stops quietly at an entry that would run
   * past {@code end} or whose header is implausible (a reader never looks past data it was told
   * is complete). {@code limit}: at most this many headers.
   */
  static List<Entry> scan(FileChannel channel, long start, long end, int limit)
      throws IOException {
    List<Entry> out = new ArrayList<>();
    long position = start;
    byte[] buf = new byte[0];
    long bufStart = position;
    while (position + LOG_OVERHEAD + 5 <= end && out.size() < limit) {
      long at = position - bufStart;
      if (at + HEADER_SIZE > buf.length) {
        int chunk = buf.length == 0 ? FIRST_CHUNK_BYTES : CHUNK_BYTES;
        buf = read(channel, position, (int) Math.min(chunk, end - position));
        bufStart = position;
        at = 0;
        if (buf.length < LOG_OVERHEAD + 5) {
          break;
        }
      }
      int i = (int) at;
      int magic = buf[i + MAGIC_OFFSET];
      if (magic == 2 && buf.length - i < HEADER_SIZE) {
        break;
      }
      long size = (long) Bytes.i32(buf, i + 8) + LOG_OVERHEAD;
      int minimum = magic == 2 ? HEADER_SIZE : LEGACY_MIN_BYTES;
      if (magic > 2 || magic < 0 || size < minimum || position + size > end) {
        break;
      }
      out.add(header(buf, i, position));
      position += size;
    }
    return out;
  }

  /** The first header in {@code [start, end)}, or null. */
  static Entry first(FileChannel channel, long start, long end) throws IOException {
    List<Entry> one = scan(channel, start, end, 1);
    return one.isEmpty() ? null : one.get(0);
  }

  static String invalid(byte[] buf, int at, int size) {
    return Batches.invalid(buf, at, size);
  }

  /** Where complete, valid entries from {@code start} end, and the last of them (or null). */
  record Readable(long end, Entry last) {}

  /**
   * Every entry from {@code start} to {@code size} read whole (in chunks of 8 MiB) and checked;
   * the first incomplete or invalid one (a write in progress, a torn tail) ends the readable
   * data (the Python {@code log_view.readable_end}).
   */
  static Readable readableEnd(FileChannel channel, long start, long size) throws IOException {
    long position = start;
    Entry last = null;
    byte[] buf = new byte[0];
    long bufStart = position;
    int bufLength = 0;
    while (position < size) {
      long remaining = size - position;
      if (remaining < LOG_OVERHEAD + 5) {
        break;
      }
      int at = (int) (position - bufStart);
      if (at + LOG_OVERHEAD + 5 > bufLength) {
        buf = read(channel, position, (int) Math.min(VALIDATE_CHUNK_BYTES, remaining));
        bufStart = position;
        bufLength = buf.length;
        at = 0;
        if (bufLength < LOG_OVERHEAD + 5) {
          break;
        }
      }
      long entrySize = (long) Bytes.i32(buf, at + 8) + LOG_OVERHEAD;
      if (entrySize < LEGACY_MIN_BYTES || entrySize > remaining) {
        break;
      }
      if (at + entrySize > bufLength) {
        buf = read(channel, position, (int) Math.max(entrySize, Math.min(VALIDATE_CHUNK_BYTES, remaining)));
        bufStart = position;
        bufLength = buf.length;
        at = 0;
        if (entrySize > bufLength) {
          break;
        }
      }
      if (invalid(buf, at, (int) entrySize) != null) {
        break;
      }
      last = header(buf, at, position);
      position += entrySize;
    }
    return new Readable(position, last);
  }
}
