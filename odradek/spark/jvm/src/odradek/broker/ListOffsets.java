package odradek.broker;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import odradek.source.TopicPartition;

/**
 * ListOffsets v2 (api key 2): per partition, -2 the log start offset, -1 the log end offset
 * (the last stable offset with read_committed), else the first offset whose record timestamp is
 * at least the given one (ms). v2 is the first version with the isolation level.
 *
 * <pre>
 *   request   replica_id int32 (-1, a consumer) | isolation_level int8 (0 uncommitted, 1 committed)
 *             topics: [name string, partitions: [partition_index int32, timestamp int64]]
 *   response  throttle_time_ms int32
 *             topics: [name string, partitions: [partition_index int32, error_code int16,
 *                                               timestamp int64, offset int64]]
 * </pre>
 *
 * An error or an offset of -1 (no record that recent) is a null answer.
 */
final class ListOffsets {
  static final int API_KEY = 2;
  static final int VERSION = 2;

  private ListOffsets() {}

  static Map<TopicPartition, Long> query(
      KafkaConnection conn, Map<TopicPartition, Long> query, boolean readCommitted) {
    Map<String, List<Map.Entry<TopicPartition, Long>>> byTopic = new TreeMap<>();
    for (Map.Entry<TopicPartition, Long> e : query.entrySet()) {
      byTopic.computeIfAbsent(e.getKey().topic(), t -> new ArrayList<>()).add(e);
    }
    Request request = new Request(API_KEY, VERSION, conn.nextCorrelationId());
    request.int32(-1).int8(readCommitted ? 1 : 0).int32(byTopic.size());
    for (Map.Entry<String, List<Map.Entry<TopicPartition, Long>>> t : byTopic.entrySet()) {
      request.string(t.getKey()).int32(t.getValue().size());
      for (Map.Entry<TopicPartition, Long> e : t.getValue()) {
        request.int32(e.getKey().partition()).int64(e.getValue());
      }
    }
    Response r = conn.call(request);
    r.int32(); // throttle_time_ms
    Map<TopicPartition, Long> answers = new HashMap<>();
    for (TopicPartition tp : query.keySet()) {
      answers.put(tp, null);
    }
    for (int t = r.count(); t > 0; t--) {
      String topic = r.string();
      for (int p = r.count(); p > 0; p--) {
        int partition = r.int32();
        int error = r.int16();
        r.int64(); // timestamp
        long offset = r.int64();
        TopicPartition tp = new TopicPartition(topic, partition);
        if (answers.containsKey(tp)) {
          answers.put(tp, error == ErrorCodes.NONE && offset >= 0 ? offset : null);
        }
      }
    }
    return answers;
  }
}
