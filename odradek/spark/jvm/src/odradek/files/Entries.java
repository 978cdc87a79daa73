package odradek.files;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32;
import java.util.zip.CRC32C;

/**
 * Walking the entries of a {@code .log} file by position (the Python {@code storage.scan}).
 * Every entry, whatever its magic, starts with the same 17 bytes:
 *
 * <pre>
 *   0  offset   int64   v2: baseOffset; v0/v1: the (last) offset of the message
 *   8  length   int32   bytes that follow this field (entry size - 12)
 *   12 (v2: partitionLeaderEpoch, v0/v1: crc)
 *   16 magic    int8
 * </pre>
 *
 * A v2 batch header is 61 bytes: {@code 17 crc u32 (CRC-32C of bytes 21..end), 21 attributes
 * i16, 23 lastOffsetDelta i32, 27 baseTimestamp i64, 35 maxTimestamp i64, 43 producerId i64, 51
 * producerEpoch i16, 53 baseSequence i32, 57 recordCount i32}. A legacy v0/v1 entry is {@code
 * 12 crc u32 (CRC-32 of bytes 16..end), 16 magic, 17 attributes, [18 timestamp i64 (v1)], key
 * and value as int32-length-prefixed bytes}; at least 14 (v0) or 22 (v1) bytes after the
 * length field.
 *
 * <p>{@link #scan} reads headers only (lookups, planning); {@link #readableEnd} reads and checks
 * every entry in full and stops at the first incomplete or invalid one. Reads are positional
 * ({@code FileChannel.read(buffer, position)}): nothing here moves a file pointer, writes or
 * maps a file.
 */
final class Entries {
  static final int LOG_OVERHEAD = 12;
  static final int HEADER_SIZE = 61;
  static final int MAGIC_OFFSET = 16;
  static final int CRC_START = 21;
  static final int LEGACY_MIN_BYTES = LOG_OVERHEAD + 14;
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

  /**
   * Why the entry at {@code buf[at, at + size)} is invalid, or null if it is valid: v2 magic,
   * size, CRC-32C, non-negative count and last offset delta, a known codec; legacy size, magic
   * and CRC-32 (the Python {@code validate_batch} / {@code validate_legacy_entry}).
   */
  static String invalid(byte[] buf, int at, int size) {
    int magic = buf[at + MAGIC_OFFSET];
    if (magic == 2) {
      if (size < HEADER_SIZE) {
        return "record batch length " + (size - LOG_OVERHEAD) + " is below the minimum";
      }
      CRC32C crc = new CRC32C();
      crc.update(buf, at + CRC_START, size - CRC_START);
      if ((int) crc.getValue() != Bytes.i32(buf, at + 17)) {
        return "record batch CRC mismatch at offset " + Bytes.i64(buf, at);
      }
      if (Bytes.i32(buf, at + 57) < 0 || Bytes.i32(buf, at + 23) < 0) {
        return "negative record count or last offset delta";
      }
      if ((Bytes.i16(buf, at + 21) & 0x07) > 4) {
        return "unknown compression codec in record batch at offset " + Bytes.i64(buf, at);
      }
      return null;
    }
    if (magic != 0 && magic != 1) {
      return "unsupported magic " + magic;
    }
    if (size - LOG_OVERHEAD < (magic == 0 ? 14 : 22)) {
      return "legacy message size " + (size - LOG_OVERHEAD) + " is below the minimum";
    }
    CRC32 crc = new CRC32();
    crc.update(buf, at + MAGIC_OFFSET, size - MAGIC_OFFSET);
    if ((int) crc.getValue() != Bytes.i32(buf, at + 12)) {
      return "legacy message CRC mismatch at offset " + Bytes.i64(buf, at);
    }
    return null;
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
