package odradek.broker;

import java.util.Map;
import odradek.records.Batches;
import odradek.records.Bytes;
import odradek.records.Columns;
import odradek.records.CorruptRecordException;
import odradek.records.EntryDecoder;
import odradek.source.DataLoss;
import odradek.source.Offsets;
import odradek.source.TopicPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * One task: an {@link OffsetRange} fetched from the broker → columnar batches of about 4096 rows
 * (the Python source's {@code fetch.read_range}, with the file reader's decoding). One
 * connection per task; {@code position} is the next offset the task needs, from {@code
 * fromOffset}; the task never reads past {@code untilOffset}.
 *
 * <ol>
 *   <li>Fetch from {@code position} (at most {@code fetch.max.bytes}). As soon as a response
 *       with whole entries is in, the Fetch for the offset after its last whole entry is sent
 *       (pipelined on the same connection), so the broker reads and sends the next records
 *       while these are decoded; a range's last response asks for nothing more. The records are
 *       decoded where they landed in the connection's buffer, entry by entry, by the shared
 *       {@link EntryDecoder} (CRC check, control batches and, with read_committed, the batches
 *       of the aborted transactions the response lists ({@link AbortedTransactions}) left out;
 *       only records in {@code [position, untilOffset)} become rows; {@code count(*)} decodes
 *       nothing). After each whole entry {@code position} moves past its last offset. A partial
 *       entry at the end of the records is left for the next fetch.
 *   <li>No whole entry while the high watermark is above {@code position}: the next batch is
 *       larger than the limit; the limit doubles (up to 1 GiB) and the fetch is repeated.
 *   <li>Nothing to read yet (the high watermark at or below {@code position}): fetch again
 *       (the broker waits up to 500 ms for data) until {@code kafkaConsumer.pollTimeoutMs}
 *       passes without progress, then fail naming the partition and offsets.
 *   <li>{@code OFFSET_OUT_OF_RANGE}, or a log start offset past {@code position} (retention,
 *       DeleteRecords): with {@code failOnDataLoss} the task fails; without, it goes on from the
 *       new log start offset (and ends if that is past the range). Any other error fails the
 *       task with Kafka's error name.
 * </ol>
 */
public final class FetchReader implements PartitionReader<ColumnarBatch> {
  private static final int TARGET_ROWS = 4096;
  private static final int MAX_WAIT_MS = 500;
  private static final int LARGEST_FETCH_BYTES = 1 << 30;

  private final OffsetRange r;
  private final BrokerOptions options;
  private final Columns columns;
  private final EntryDecoder decoder;
  private final KafkaConnection conn;
  private long position;
  private int fetchBytes;
  private long deadline;
  // the current Fetch response's records: buf[at, end)
  private byte[] buf;
  private int at;
  private int end;
  private EntryDecoder.Aborted aborted = EntryDecoder.NONE;
  private long inFlight = -1; // the offset of a Fetch sent ahead and not yet received, or -1

  FetchReader(OffsetRange r, BrokerOptions options, StructType schema) {
    this.r = r;
    this.options = options;
    this.columns = new Columns(schema, r.topic(), r.partition());
    this.decoder = new EntryDecoder(columns);
    this.position = r.fromOffset();
    this.fetchBytes = options.fetchMaxBytes;
    this.conn = KafkaConnection.open(options);
    this.deadline = System.nanoTime() + options.pollTimeout * 1_000_000L;
  }

  @Override
  public boolean next() {
    columns.reset();
    while (columns.rows < TARGET_ROWS && position < r.untilOffset()) {
      if (!decodeEntry()) {
        fetch();
      }
    }
    return columns.rows > 0;
  }

  /** Decodes the next whole entry of the current records; false when there is none. */
  private boolean decodeEntry() {
    if (end - at < Batches.LOG_OVERHEAD + 5) {
      return false;
    }
    long size = (long) Bytes.i32(buf, at + 8) + Batches.LOG_OVERHEAD;
    if (size < Batches.LEGACY_MIN_BYTES) {
      throw corrupt("entry size " + size + " is implausible");
    }
    if (size > end - at) {
      return false;
    }
    try {
      decoder.decode(buf, at, (int) size, position, r.untilOffset(), aborted);
    } catch (CorruptRecordException e) {
      throw corrupt(e.getMessage());
    }
    long last = Bytes.i64(buf, at); // a legacy entry's offset is its last one
    if (buf[at + Batches.MAGIC_OFFSET] == 2) {
      last += Bytes.i32(buf, at + Batches.LAST_OFFSET_DELTA);
    }
    position = Math.min(Math.max(position, last + 1), r.untilOffset());
    at += (int) size;
    return true;
  }

  /** Steps 1-4 of the class comment: the next response's records, or progress past a loss. */
  private void fetch() {
    if (inFlight >= 0 && inFlight != position) {
      Fetch.receive(conn, r.topic(), r.partition()); // sent ahead for an offset no longer wanted
      inFlight = -1;
    }
    if (inFlight < 0) {
      conn.send(request(position));
    }
    inFlight = -1;
    Fetch.Partition p = Fetch.receive(conn, r.topic(), r.partition());
    buf = p.buf();
    at = p.recordsAt();
    end = p.recordsAt() + p.recordsLength();
    aborted = options.readCommitted && p.aborted().length > 0
        ? new AbortedTransactions(p.aborted()) : EntryDecoder.NONE;
    if (p.error() == ErrorCodes.OFFSET_OUT_OF_RANGE) {
      end = at;
      skipLost();
      return;
    }
    if (p.error() != ErrorCodes.NONE) {
      throw new IllegalStateException(
          "fetching " + r.topic() + "-" + r.partition() + " at offset " + position + " from "
              + conn.address() + ": " + ErrorCodes.name(p.error()));
    }
    if (end - at >= Batches.LOG_OVERHEAD + 5) {
      long size = (long) Bytes.i32(buf, at + 8) + Batches.LOG_OVERHEAD;
      if (size <= end - at) {
        deadline = System.nanoTime() + options.pollTimeout * 1_000_000L;
        long next = afterWholeEntries();
        if (next > position && next < r.untilOffset()) {
          conn.send(request(next)); // step 1: the broker sends it while these are decoded
          inFlight = next;
        }
        return;
      }
    }
    if (p.highWatermark() > position && p.recordsLength() > 0) {
      if (fetchBytes >= LARGEST_FETCH_BYTES) {
        throw new IllegalStateException(
            r.topic() + "-" + r.partition() + ": the record batch at offset " + position
                + " is larger than " + fetchBytes + " bytes");
      }
      fetchBytes = (int) Math.min((long) fetchBytes * 2, LARGEST_FETCH_BYTES);
      end = at;
      return;
    }
    end = at;
    if (p.logStartOffset() > position) {
      skipLost();
      return;
    }
    if (System.nanoTime() > deadline) {
      throw new IllegalStateException(
          r.topic() + "-" + r.partition() + ": no record at offset " + position + " after "
              + options.pollTimeout + " ms (high watermark " + p.highWatermark()
              + ", the range ends at " + r.untilOffset() + "); set kafkaConsumer.pollTimeoutMs"
              + " to wait longer");
    }
  }

  private Request request(long offset) {
    return Fetch.request(conn, r.topic(), r.partition(), offset, fetchBytes, MAX_WAIT_MS,
        options.readCommitted);
  }

  /** The offset after the last whole entry of the current records (their headers only). */
  private long afterWholeEntries() {
    long next = -1;
    for (int i = at; end - i >= Batches.LOG_OVERHEAD + 5; ) {
      long size = (long) Bytes.i32(buf, i + 8) + Batches.LOG_OVERHEAD;
      if (size < Batches.LEGACY_MIN_BYTES || size > end - i) {
        break;
      }
      next = Bytes.i64(buf, i) + 1;
      if (buf[i + Batches.MAGIC_OFFSET] == 2) {
        next += Bytes.i32(buf, i + Batches.LAST_OFFSET_DELTA);
      }
      i += (int) size;
    }
    return next;
  }

  /** Where to go on after {@code position} was deleted (or fail, with failOnDataLoss). */
  private void skipLost() {
    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
    Long earliest =
        new BrokerCluster(conn, options.readCommitted)
            .listOffsets(Map.of(tp, Offsets.EARLIEST))
            .get(tp);
    // Past the log start: the records were deleted. At or before it: the log end went back
    // below position (the topic was recreated or truncated), so the rest of the range is gone.
    long resume =
        earliest != null && earliest > position ? Math.min(earliest, r.untilOffset())
            : r.untilOffset();
    DataLoss.report(
        options.failOnDataLoss,
        "Cannot fetch offset " + position + " of " + tp + " (its earliest offset is now "
            + earliest + "): offsets " + position + " to " + (resume - 1) + " are lost.",
        DataLoss.BROKER);
    position = resume;
  }

  private CorruptRecordException corrupt(String problem) {
    return new CorruptRecordException(
        r.topic() + "-" + r.partition() + " fetched from " + conn.address() + " at offset "
            + position + ": " + problem);
  }

  @Override
  public ColumnarBatch get() {
    return columns.batch();
  }

  @Override
  public void close() {
    columns.close();
    conn.close();
  }
}
