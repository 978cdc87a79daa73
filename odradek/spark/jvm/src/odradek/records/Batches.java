package odradek.records;

import java.util.zip.CRC32;
import java.util.zip.CRC32C;

/**
 * The entries of a Kafka log, as a {@code .log} file and a Fetch response's {@code records}
 * both hold them back to back. Every entry, whatever its magic, starts with the same 17 bytes:
 *
 * <pre>
 *   0  offset   int64   v2: baseOffset; v0/v1: the (last) offset of the message
 *   8  length   int32   bytes that follow this field (entry size - 12)
 *   12 (v2: partitionLeaderEpoch, v0/v1: crc)
 *   16 magic    int8
 * </pre>
 *
 * A v2 batch header is 61 bytes: {@code 17 crc u32 (CRC-32C of bytes 21..end), 21 attributes
 * i16 (bits 0-2 codec, 3 LogAppendTime, 4 transactional, 5 control), 23 lastOffsetDelta i32, 27
 * baseTimestamp i64, 35 maxTimestamp i64, 43 producerId i64, 51 producerEpoch i16, 53
 * baseSequence i32, 57 recordCount i32}. A legacy v0/v1 entry is {@code 12 crc u32 (CRC-32 of
 * bytes 16..end), 16 magic, 17 attributes, [18 timestamp i64 (v1)], key and value as
 * int32-length-prefixed bytes}; at least 14 (v0) or 22 (v1) bytes after the length field.
 */
public final class Batches {
  public static final int LOG_OVERHEAD = 12;
  public static final int HEADER_SIZE = 61;
  public static final int MAGIC_OFFSET = 16;
  public static final int CRC_START = 21;
  public static final int LEGACY_MIN_BYTES = LOG_OVERHEAD + 14;
  public static final int ATTRIBUTES = 21;
  public static final int LAST_OFFSET_DELTA = 23;
  public static final int BASE_TIMESTAMP = 27;
  public static final int MAX_TIMESTAMP = 35;
  public static final int PRODUCER_ID = 43;
  public static final int RECORD_COUNT = 57;
  public static final int CONTROL = 0x20;
  public static final int TRANSACTIONAL = 0x10;
  public static final int LOG_APPEND_TIME = 0x08;

  private Batches() {}

  /**
   * Why the entry at {@code buf[at, at + size)} is invalid, or null if it is valid: v2 magic,
   * size, CRC-32C, non-negative count and last offset delta, a known codec; legacy size, magic
   * and CRC-32 (the Python {@code validate_batch} / {@code validate_legacy_entry}).
   */
  public static String invalid(byte[] buf, int at, int size) {
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
      if (Bytes.i32(buf, at + RECORD_COUNT) < 0 || Bytes.i32(buf, at + LAST_OFFSET_DELTA) < 0) {
        return "negative record count or last offset delta";
      }
      if ((Bytes.i16(buf, at + ATTRIBUTES) & 0x07) > 4) {
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
}
