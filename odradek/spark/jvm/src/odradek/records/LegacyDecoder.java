package odradek.records;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Kafka's legacy message sets, magic v0 and v1, read-only (logs from before Kafka 0.11; the
 * Python {@code protocol.legacy}). One shallow entry:
 *
 * <pre>
 *   0      offset        int64   the message's offset; a compressed wrapper's is the offset of
 *                                its LAST inner message
 *   8      message_size  int32   bytes after this field
 *   12     crc           uint32  CRC-32 of bytes 16..end
 *   16     magic         int8    0 or 1
 *   17     attributes    int8    bits 0-2 codec (none/gzip/snappy/lz4), bit 3 LogAppendTime (v1)
 *   18     timestamp     int64   v1 only
 *   18|26  keyLength int32 (-1 null), key, valueLength int32 (-1 null), value
 * </pre>
 *
 * A wrapper's value is a compressed message set of uncompressed inner entries of the same
 * magic. v0 inner offsets are absolute; v1 inner offsets are relative: absolute = wrapper offset
 * - last inner relative + inner relative. A v1 wrapper with LogAppendTime gives its timestamp to
 * every inner message. v0 messages have no timestamp (-1). Rare and slow: one object per message.
 */
final class LegacyDecoder {
  private LegacyDecoder() {}

  /** One message: offset, timestamp (ms), timestamp type (1 LogAppendTime), key, value. */
  record Message(long offset, long timestamp, int timestampType, byte[] key, byte[] value) {}

  /** The messages of the validated shallow entry at {@code b[at, at + size)}. */
  static List<Message> decode(byte[] b, int at, int size) throws IOException {
    String problem = Batches.invalid(b, at, size);
    if (problem != null) {
      throw new CorruptRecordException(problem);
    }
    int magic = b[at + 16];
    int attributes = b[at + 17];
    long offset = Bytes.i64(b, at);
    long timestamp = magic == 1 ? Bytes.i64(b, at + 18) : -1;
    byte[][] kv = keyValue(b, at, size, magic, offset);
    int codec = attributes & 0x07;
    int type = magic == 1 && (attributes & 0x08) != 0 ? 1 : 0;
    if (codec == 0) {
      return List.of(new Message(offset, timestamp, type, kv[0], kv[1]));
    }
    if (codec > 3 || kv[1] == null) {
      throw new CorruptRecordException("legacy wrapper at offset " + offset + ": bad codec or value");
    }
    byte[] inner = Codecs.decompress(codec, kv[1], 0, kv[1].length);
    List<long[]> heads = new ArrayList<>(); // offset, timestamp
    List<byte[][]> bodies = new ArrayList<>();
    for (int p = 0; p < inner.length; ) {
      if (inner.length - p < Batches.LEGACY_MIN_BYTES) {
        throw new CorruptRecordException("legacy wrapper at offset " + offset + ": cut short");
      }
      int innerSize = Bytes.i32(inner, p + 8) + Batches.LOG_OVERHEAD;
      if (innerSize < Batches.LEGACY_MIN_BYTES || innerSize > inner.length - p) {
        throw new CorruptRecordException("legacy wrapper at offset " + offset + ": bad inner size");
      }
      String bad = Batches.invalid(inner, p, innerSize);
      if (bad != null || inner[p + 16] != magic || (inner[p + 17] & 0x07) != 0) {
        throw new CorruptRecordException(
            "legacy wrapper at offset " + offset + ": bad inner message" + (bad == null ? "" : ": " + bad));
      }
      long ts = magic == 1 ? Bytes.i64(inner, p + 18) : -1;
      heads.add(new long[] {Bytes.i64(inner, p), ts});
      bodies.add(keyValue(inner, p, innerSize, magic, offset));
      p += innerSize;
    }
    if (heads.isEmpty()) {
      throw new CorruptRecordException("legacy wrapper at offset " + offset + " holds no message");
    }
    long shift = magic == 0 ? 0 : offset - heads.get(heads.size() - 1)[0];
    List<Message> out = new ArrayList<>(heads.size());
    for (int i = 0; i < heads.size(); i++) {
      long ts = type == 1 ? timestamp : heads.get(i)[1];
      out.add(new Message(shift + heads.get(i)[0], ts, type, bodies.get(i)[0], bodies.get(i)[1]));
    }
    return out;
  }

  private static byte[][] keyValue(byte[] b, int at, int size, int magic, long offset) {
    int end = at + size;
    int p = at + (magic == 0 ? 18 : 26);
    byte[] key = null;
    int keyLength = Bytes.i32(b, p);
    p += 4;
    if (keyLength >= 0) {
      if (keyLength > end - 4 - p) {
        throw new CorruptRecordException("legacy message at offset " + offset + ": key overruns");
      }
      key = Arrays.copyOfRange(b, p, p + keyLength);
      p += keyLength;
    }
    int valueLength = Bytes.i32(b, p);
    p += 4;
    byte[] value = null;
    if (valueLength >= 0) {
      if (valueLength > end - p) {
        throw new CorruptRecordException("legacy message at offset " + offset + ": value overruns");
      }
      value = Arrays.copyOfRange(b, p, p + valueLength);
      p += valueLength;
    }
    if (p != end) {
      throw new CorruptRecordException("legacy message at offset " + offset + ": trailing bytes");
    }
    return new byte[][] {key, value};
  }
}
