package odradek.broker;

/**
 * Fetch v5 (api key 1) of one partition from one offset: what a task sends. v4 brought the
 * isolation level, the last stable offset and the aborted transactions, v5 the log start offset;
 * later versions add fetch sessions (v7, refused by odradek anyway) and are otherwise the same
 * for a consumer.
 *
 * <pre>
 *   request   replica_id int32 (-1) | max_wait_ms int32 | min_bytes int32 | max_bytes int32
 *             isolation_level int8 (0 read_uncommitted, 1 read_committed)
 *             topics: [topic string, partitions: [partition int32, fetch_offset int64,
 *                                                 log_start_offset int64 (-1), partition_max_bytes int32]]
 *   response  throttle_time_ms int32
 *             responses: [topic string, partitions: [partition_index int32, error_code int16,
 *                         high_watermark int64, last_stable_offset int64, log_start_offset int64,
 *                         aborted_transactions: [producer_id int64, first_offset int64] (nullable),
 *                         records bytes (nullable)]]
 * </pre>
 *
 * {@code records} holds whole entries from the batch that contains {@code fetch_offset}
 * (so it may start before it), and may end with a partial one (cut at the byte limit), which a
 * reader leaves for its next fetch. At least one whole batch comes back even when it is larger
 * than the limits (KIP-74).
 */
final class Fetch {
  static final int API_KEY = 1;
  static final int VERSION = 5;

  private Fetch() {}

  /**
   * One partition's answer. {@code records} is {@code buf[recordsAt, recordsAt + recordsLength)}
   * inside the connection's buffer (valid until its next call); {@code aborted} holds pairs
   * (producer id, first offset).
   */
  record Partition(
      int error,
      long highWatermark,
      long lastStableOffset,
      long logStartOffset,
      long[] aborted,
      byte[] buf,
      int recordsAt,
      int recordsLength) {}

  /** The request for {@code topic}-{@code partition} from {@code offset}. */
  static Request request(
      KafkaConnection conn,
      String topic,
      int partition,
      long offset,
      int maxBytes,
      int maxWaitMs,
      boolean readCommitted) {
    Request request = new Request(API_KEY, VERSION, conn.nextCorrelationId());
    request.int32(-1).int32(maxWaitMs).int32(1).int32(maxBytes).int8(readCommitted ? 1 : 0);
    request.int32(1).string(topic).int32(1);
    request.int32(partition).int64(offset).int64(-1).int32(maxBytes);
    return request;
  }

  /** The answer for {@code topic}-{@code partition} in the next response {@code conn} receives. */
  static Partition receive(KafkaConnection conn, String topic, int partition) {
    Response r = conn.receive();
    r.int32(); // throttle_time_ms
    Partition found = null;
    for (int t = r.count(); t > 0; t--) {
      String name = r.string();
      for (int p = r.count(); p > 0; p--) {
        int index = r.int32();
        int error = r.int16();
        long highWatermark = r.int64();
        long lastStable = r.int64();
        long logStart = r.int64();
        int abortedCount = r.count();
        long[] aborted = new long[abortedCount * 2];
        for (int i = 0; i < aborted.length; i++) {
          aborted[i] = r.int64();
        }
        int at = r.bytes();
        int length = Math.max(r.lastLength, 0);
        if (topic.equals(name) && index == partition) {
          found =
              new Partition(error, highWatermark, lastStable, logStart, aborted, r.b, at, length);
        }
      }
    }
    if (found == null) {
      throw new ProtocolException(
          conn.address() + ": the Fetch response has no " + topic + "-" + partition);
    }
    return found;
  }
}
