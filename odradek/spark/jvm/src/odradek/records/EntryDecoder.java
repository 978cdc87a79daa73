package odradek.records;

import java.io.IOException;
import java.util.List;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;

/**
 * One validated entry of a log ({@link Batches}: a v2 record batch or a legacy v0/v1 message
 * set) → rows of a {@link Columns}: what a consumer does with the entries it reads, shared by the
 * file reader (entries from a segment) and the broker reader (entries from a Fetch response).
 *
 * <ol>
 *   <li>The entry is checked ({@link Batches#invalid}: CRC, sizes, codec); a bad one is a
 *       {@link CorruptRecordException}.
 *   <li>A v2 batch is skipped when it starts at or past {@code until}, ends before {@code from},
 *       holds no record, is a control batch (commit/abort markers are never rows) or, if
 *       transactional, {@link Aborted} says its transaction was aborted.
 *   <li>When the columns need no per-record value ({@code count(*)}) and the batch lies wholly
 *       inside {@code [from, until)}, its header's record count is added and nothing is
 *       decompressed or decoded.
 *   <li>Otherwise the records section is decompressed if need be ({@link Codecs}) and decoded
 *       ({@link RecordDecoder}), keeping the records {@code from <= offset < until}. Legacy
 *       entries go through {@link LegacyDecoder}, one object per message (rare and slow).
 * </ol>
 *
 * Not thread-safe: one per task.
 */
public final class EntryDecoder {
  /** Which transactional batches a read leaves out (read_committed). */
  @FunctionalInterface
  public interface Aborted {
    /**
     * Called for every transactional v2 batch in the read range, control batches included (so
     * a reader that tracks transactions sees their markers), in log order; true leaves the
     * batch out. A control batch is left out whatever it answers.
     */
    boolean skip(long producerId, long baseOffset, boolean control);
  }

  /** Keeps every batch of a transaction (read_uncommitted). */
  public static final Aborted NONE = (producerId, baseOffset, control) -> false;

  private final RecordDecoder decoder = new RecordDecoder();
  private final Columns columns;

  public EntryDecoder(Columns columns) {
    this.columns = columns;
  }

  /** Decodes the entry at {@code buf[at, at + size)} (steps in the class comment). */
  public void decode(byte[] buf, int at, int size, long from, long until, Aborted aborted) {
    String problem = Batches.invalid(buf, at, size);
    if (problem != null) {
      throw new CorruptRecordException(problem);
    }
    if (buf[at + Batches.MAGIC_OFFSET] != 2) {
      legacy(buf, at, size, from, until);
      return;
    }
    long base = Bytes.i64(buf, at);
    if (base >= until) {
      return;
    }
    int attributes = Bytes.i16(buf, at + Batches.ATTRIBUTES);
    long last = base + Bytes.i32(buf, at + Batches.LAST_OFFSET_DELTA);
    int count = Bytes.i32(buf, at + Batches.RECORD_COUNT);
    if (last < from) {
      return;
    }
    boolean control = (attributes & Batches.CONTROL) != 0;
    if ((attributes & Batches.TRANSACTIONAL) != 0
        && aborted.skip(Bytes.i64(buf, at + Batches.PRODUCER_ID), base, control)) {
      return;
    }
    if (control || count <= 0) {
      return;
    }
    if (!columns.perRecord && base >= from && last < until) {
      columns.rows += count;
      return;
    }
    long baseTimestamp = Bytes.i64(buf, at + Batches.BASE_TIMESTAMP);
    long append =
        (attributes & Batches.LOG_APPEND_TIME) != 0 ? Bytes.i64(buf, at + Batches.MAX_TIMESTAMP) : -1;
    int codec = attributes & 0x07;
    if (codec == 0) {
      decoder.decode(buf, at + Batches.HEADER_SIZE, at + size, count, base, baseTimestamp, append,
          from, until, columns);
      return;
    }
    byte[] body;
    try {
      body = Codecs.decompress(codec, buf, at + Batches.HEADER_SIZE, size - Batches.HEADER_SIZE);
    } catch (IOException e) {
      throw new CorruptRecordException("record batch at offset " + base + ": " + e);
    }
    decoder.decode(body, 0, body.length, count, base, baseTimestamp, append, from, until, columns);
  }

  private void legacy(byte[] buf, int at, int size, long from, long until) {
    List<LegacyDecoder.Message> messages;
    try {
      messages = LegacyDecoder.decode(buf, at, size);
    } catch (IOException e) {
      throw new CorruptRecordException(e.getMessage());
    }
    columns.reserve(messages.size());
    for (LegacyDecoder.Message m : messages) {
      if (m.offset() < from || m.offset() >= until) {
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

  private static void put(WritableColumnVector v, int row, byte[] bytes) {
    if (v == null) {
      return;
    }
    if (bytes == null) {
      v.putNull(row);
    } else {
      v.putByteArray(row, bytes, 0, bytes.length);
    }
  }
}
