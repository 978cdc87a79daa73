package odradek.records;

import java.io.IOException;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;

/**
 * The records section of a RecordBatch v2 ("body": after the 61-byte header, decompressed if
 * the batch is compressed) → rows of a {@link Columns}. A body holds {@code count} records back
 * to back, each:
 *
 * <pre>
 *   length          varint   bytes after this field, up to the end of the record
 *   attributes      int8     unused
 *   timestampDelta  varlong  timestamp - the batch's base timestamp
 *   offsetDelta     varint   offset - the batch's base offset
 *   keyLength       varint   -1 for a null key
 *   key             bytes
 *   valueLength     varint   -1 for a null value
 *   value           bytes
 *   headersCount    varint
 *     headerKeyLength varint, headerKey (UTF-8), headerValueLength varint (-1 null), value
 * </pre>
 *
 * Varints are zig-zag LEB128 of at most 10 bytes read as 64 bits. The rules are those of the
 * Python reader's compiled decoder ({@code _arrow_records.c}), each a {@link
 * CorruptRecordException}: (1) a record length is at least 6 and fits in what is left of the
 * body, and {@code count} records fill the body exactly; (2) every field varint ends inside its
 * record, and a key or value length is -1 or at most what is left of the record; (3) the header
 * count is not negative, and when it is 0 the record ends right after it; headers are parsed
 * (and checked to fill their record) only when the {@code headers} column is read.
 *
 * <p>A record becomes a row when {@code from <= offset < until}. Timestamps: the batch's max
 * timestamp for every record of a LogAppendTime batch ({@code timestampType} 1), else base
 * timestamp + delta (0); in the vector as microseconds. Not thread-safe: one per task.
 */
public final class RecordDecoder {
  private byte[] b;
  private int p;

  /**
   * Decodes {@code count} records of {@code b[pos, end)} into {@code out}. The wanted {@code
   * key} / {@code value} vectors each get the whole body appended once (one array copy per
   * batch); each row then points into it ({@code putArray(row, start, length)}), so no byte is
   * copied per record.
   */
  void decode(
      byte[] body,
      int pos,
      int end,
      int count,
      long baseOffset,
      long baseTimestamp,
      long appendTimestamp, // -1: CreateTime
      long from,
      long until,
      Columns out) {
    this.b = body;
    this.p = pos;
    out.reserve(count);
    WritableColumnVector key = out.key;
    WritableColumnVector value = out.value;
    WritableColumnVector offsetV = out.offset;
    WritableColumnVector timestampV = out.timestamp;
    WritableColumnVector typeV = out.timestampType;
    WritableColumnVector headersV = out.headers;
    // where b[pos] landed in each vector's byte array
    int keyShift = key == null ? 0 : key.arrayData().appendBytes(end - pos, b, pos) - pos;
    int valueShift = value == null ? 0 : value.arrayData().appendBytes(end - pos, b, pos) - pos;
    int type = appendTimestamp >= 0 ? 1 : 0;
    for (int i = 0; i < count; i++) {
      long length = varint(end);
      if (length < 6 || length > end - p) {
        throw new CorruptRecordException(
            "record " + i + " of the batch at offset " + baseOffset + ": bad length " + length);
      }
      int recordEnd = p + (int) length;
      p++; // attributes
      long timestampDelta = varint(recordEnd);
      long offsetDelta = varint(recordEnd);
      long keyLength = varint(recordEnd);
      int keyAt = p;
      p = skip(keyLength, recordEnd, baseOffset, "key");
      long valueLength = varint(recordEnd);
      int valueAt = p;
      p = skip(valueLength, recordEnd, baseOffset, "value");
      long headerCount = varint(recordEnd);
      if (headerCount < 0 || (headerCount == 0 && p != recordEnd)) {
        throw new CorruptRecordException(
            "record " + i + " of the batch at offset " + baseOffset + ": bad header count");
      }
      int headersAt = p;
      p = recordEnd;
      long offset = baseOffset + offsetDelta;
      if (offset < from || offset >= until) {
        continue;
      }
      int row = out.rows++;
      if (key != null) {
        if (keyLength < 0) {
          key.putNull(row);
        } else {
          key.putArray(row, keyAt + keyShift, (int) keyLength);
        }
      }
      if (value != null) {
        if (valueLength < 0) {
          value.putNull(row);
        } else {
          value.putArray(row, valueAt + valueShift, (int) valueLength);
        }
      }
      if (offsetV != null) {
        offsetV.putLong(row, offset);
      }
      if (timestampV != null) {
        long ms = type == 1 ? appendTimestamp : baseTimestamp + timestampDelta;
        timestampV.putLong(row, ms * 1000);
      }
      if (typeV != null) {
        typeV.putInt(row, type);
      }
      if (headersV != null) {
        if (headerCount == 0) {
          headersV.putNull(row);
        } else {
          headers(headersV, row, headersAt, recordEnd, (int) headerCount, baseOffset);
        }
      }
    }
    if (p != end) {
      throw new CorruptRecordException(
          "the batch at offset " + baseOffset + ": " + count + " records do not fill its body");
    }
  }

  private int skip(long length, int recordEnd, long baseOffset, String what) {
    if (length < -1 || length > recordEnd - p) {
      throw new CorruptRecordException(
          "the batch at offset " + baseOffset + ": bad " + what + " length " + length);
    }
    return length < 0 ? p : p + (int) length;
  }

  private void headers(
      WritableColumnVector headersV, int row, int pos, int end, int count, long baseOffset) {
    WritableColumnVector items = headersV.arrayData();
    WritableColumnVector keys = items.getChild(0);
    WritableColumnVector values = items.getChild(1);
    int first = items.getElementsAppended();
    p = pos;
    for (int i = 0; i < count; i++) {
      long keyLength = varint(end);
      if (keyLength < 0 || keyLength > end - p) {
        throw new CorruptRecordException("the batch at offset " + baseOffset + ": bad header key");
      }
      items.appendStruct(false);
      keys.appendByteArray(b, p, (int) keyLength);
      p += (int) keyLength;
      long valueLength = varint(end);
      if (valueLength < -1 || valueLength > end - p) {
        throw new CorruptRecordException("the batch at offset " + baseOffset + ": bad header value");
      }
      if (valueLength < 0) {
        values.appendNull();
      } else {
        values.appendByteArray(b, p, (int) valueLength);
        p += (int) valueLength;
      }
    }
    if (p != end) {
      throw new CorruptRecordException(
          "the batch at offset " + baseOffset + ": record headers do not match the record's length");
    }
    headersV.putArray(row, first, count);
  }

  /** A zig-zag varint of at most 10 bytes at {@code b[p]}, ending before {@code limit}. */
  private long varint(int limit) {
    int at = p;
    if (at < limit) { // the common cases first: one or two bytes
      int first = b[at];
      if (first >= 0) {
        p = at + 1;
        return (first >>> 1) ^ -(first & 1);
      }
      if (at + 1 < limit) {
        int second = b[at + 1];
        if (second >= 0) {
          p = at + 2;
          int raw = (first & 0x7f) | second << 7;
          return (raw >>> 1) ^ -(raw & 1);
        }
      }
    }
    return slowVarint(limit);
  }

  private long slowVarint(int limit) {
    long raw = 0;
    for (int shift = 0; ; shift += 7) {
      if (p >= limit) {
        throw new CorruptRecordException("a varint runs past its record");
      }
      if (shift > 63) {
        throw new CorruptRecordException("a varint longer than 10 bytes");
      }
      byte x = b[p++];
      raw |= (long) (x & 0x7f) << shift;
      if (x >= 0) {
        return (raw >>> 1) ^ -(raw & 1);
      }
    }
  }

  /**
   * The first offset at or after {@code minOffset} in the entry {@code data} (one whole entry)
   * whose record timestamp is at least {@code timestampMs}, or null (ListOffsets by time).
   */
  public static Long firstAtTimestamp(byte[] data, long timestampMs, long minOffset) throws IOException {
    if (data[Batches.MAGIC_OFFSET] != 2) {
      for (LegacyDecoder.Message m : LegacyDecoder.decode(data, 0, data.length)) {
        if (m.timestamp() >= timestampMs && m.offset() >= minOffset) {
          return m.offset();
        }
      }
      return null;
    }
    int attributes = Bytes.i16(data, 21);
    if ((attributes & 0x20) != 0) {
      return null; // a control batch holds no record a consumer sees
    }
    long base = Bytes.i64(data, 0);
    long baseTimestamp = Bytes.i64(data, 27);
    long maxTimestamp = Bytes.i64(data, 35);
    boolean appendTime = (attributes & 0x08) != 0;
    int count = Bytes.i32(data, 57);
    byte[] body = data;
    int pos = Batches.HEADER_SIZE;
    int end = data.length;
    if ((attributes & 0x07) != 0) {
      body = Codecs.decompress(attributes & 0x07, data, pos, end - pos);
      pos = 0;
      end = body.length;
    }
    RecordDecoder d = new RecordDecoder();
    d.b = body;
    d.p = pos;
    for (int i = 0; i < count && d.p < end; i++) {
      long length = d.varint(end);
      int recordEnd = (int) Math.min(end, d.p + Math.max(length, 0));
      d.p++;
      long ts = d.varint(recordEnd);
      long offset = base + d.varint(recordEnd);
      d.p = recordEnd;
      long recordTs = appendTime ? maxTimestamp : baseTimestamp + ts;
      if (recordTs >= timestampMs && offset >= minOffset) {
        return offset;
      }
    }
    return null;
  }
}
