package odradek.broker;

import java.util.Map;
import java.util.TreeMap;

/**
 * Metadata v1 (api key 3) for every topic: which topics exist and how many partitions each has.
 * v1 is the first version where a null topic list means all topics (never auto-creating one).
 *
 * <pre>
 *   request   topics: array (null: -1 = all topics)
 *   response  brokers: [node_id int32, host string, port int32, rack string?]
 *             controller_id int32
 *             topics: [error_code int16, name string, is_internal int8,
 *                      partitions: [error_code int16, partition_index int32, leader_id int32,
 *                                   replica_nodes [int32], isr_nodes [int32]]]
 * </pre>
 *
 * A topic answered with an error is left out, as the Python source's cluster does.
 */
final class Metadata {
  static final int API_KEY = 3;
  static final int VERSION = 1;

  private Metadata() {}

  static Map<String, Integer> topics(KafkaConnection conn) {
    Request request = new Request(API_KEY, VERSION, conn.nextCorrelationId()).int32(-1);
    Response r = conn.call(request);
    for (int i = r.count(); i > 0; i--) {
      r.int32();
      r.string();
      r.int32();
      r.string();
    }
    r.int32(); // controller_id
    Map<String, Integer> topics = new TreeMap<>();
    for (int t = r.count(); t > 0; t--) {
      int error = r.int16();
      String name = r.string();
      r.int8();
      int partitions = r.count();
      for (int p = 0; p < partitions; p++) {
        r.int16();
        r.int32();
        r.int32();
        r.skipArray(4);
        r.skipArray(4);
      }
      if (error == ErrorCodes.NONE && name != null) {
        topics.put(name, partitions);
      }
    }
    return topics;
  }
}
