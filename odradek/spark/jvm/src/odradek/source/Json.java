package odradek.source;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;

/**
 * The JSON option values of Spark's Kafka source (Jackson, which Spark ships):
 *
 * <pre>
 *   assign                     {"topicA":[0,1],"topicB":[2]}
 *   startingOffsets / ending   {"topic":{"0":23,"1":-2}}      -2 earliest, -1 latest
 *   ...OffsetsByTimestamp      {"topic":{"0":1700000000000}}  timestamps in ms, >= 0
 * </pre>
 */
final class Json {
  private static final ObjectMapper MAPPER = new ObjectMapper();

  private Json() {}

  private static JsonNode object(String option, String raw, String example) {
    JsonNode node;
    try {
      node = MAPPER.readTree(raw);
    } catch (Exception e) {
      throw new OptionError(
          option, "expected JSON like " + example + ", got '" + raw + "' (" + e.getMessage() + ")");
    }
    if (node == null || !node.isObject()) {
      throw new OptionError(option, "expected a JSON object like " + example + ", got '" + raw + "'");
    }
    return node;
  }

  static List<TopicPartition> partitions(String option, String raw) {
    String example = "{\"topicA\":[0,1],\"topicB\":[2]}";
    JsonNode root = object(option, raw, example);
    List<TopicPartition> result = new ArrayList<>();
    for (Iterator<Map.Entry<String, JsonNode>> it = root.properties().iterator(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      JsonNode list = e.getValue();
      boolean ok = list.isArray();
      LinkedHashSet<Integer> seen = new LinkedHashSet<>();
      for (JsonNode p : list) {
        if (!p.isInt() || p.asInt() < 0) {
          ok = false;
          break;
        }
        seen.add(p.asInt());
      }
      if (!ok) {
        throw new OptionError(
            option,
            "topic '" + e.getKey() + "': expected a list of partition numbers like " + example);
      }
      for (int p : seen) {
        result.add(new TopicPartition(e.getKey(), p));
      }
    }
    return result;
  }

  static Map<TopicPartition, Long> offsets(String option, String raw, boolean timestamps) {
    String example =
        timestamps ? "{\"topic\":{\"0\":1700000000000}}" : "{\"topic\":{\"0\":23,\"1\":-2}}";
    JsonNode root = object(option, raw, example);
    Map<TopicPartition, Long> result = new LinkedHashMap<>();
    for (Iterator<Map.Entry<String, JsonNode>> it = root.properties().iterator(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      String topic = e.getKey();
      if (!e.getValue().isObject()) {
        throw new OptionError(
            option,
            "topic '" + topic + "': expected an object of partition to offset like " + example);
      }
      for (Iterator<Map.Entry<String, JsonNode>> ps = e.getValue().properties().iterator(); ps.hasNext(); ) {
        Map.Entry<String, JsonNode> pe = ps.next();
        int partition;
        try {
          partition = Integer.parseInt(pe.getKey().strip());
        } catch (NumberFormatException ex) {
          partition = -1;
        }
        if (partition < 0) {
          throw new OptionError(
              option, "topic '" + topic + "': bad partition number '" + pe.getKey() + "'");
        }
        JsonNode value = pe.getValue();
        long low = timestamps ? 0 : Offsets.EARLIEST;
        if (!value.isIntegralNumber() || !value.canConvertToLong() || value.asLong() < low) {
          String what = timestamps ? "a timestamp in ms" : "an offset, -2 (earliest) or -1 (latest)";
          throw new OptionError(
              option, topic + "-" + partition + ": expected " + what + ", got " + value);
        }
        result.put(new TopicPartition(topic, partition), value.asLong());
      }
    }
    return result;
  }
}
