package odradek.source;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * Which topic-partitions a read covers: exactly one of Kafka's three strategies, with the rules
 * of the Python source's {@code options.Subscription}.
 *
 * <ul>
 *   <li>{@code subscribe}: comma-separated topics (blanks dropped, duplicates once);
 *   <li>{@code subscribePattern}: a Java regular expression matching a whole topic name (as
 *       Spark's Kafka source uses it); internal topics ({@code __...}) never match, as with
 *       Kafka's {@code exclude.internal.topics};
 *   <li>{@code assign}: JSON {@code {"topicA":[0,1],"topicB":[2]}}.
 * </ul>
 */
public final class Subscription implements Serializable {
  private static final long serialVersionUID = 1L;

  public enum Kind {
    SUBSCRIBE,
    PATTERN,
    ASSIGN
  }

  public final Kind kind;
  public final List<String> topics; // SUBSCRIBE
  public final String pattern; // PATTERN
  public final List<TopicPartition> assigned; // ASSIGN
  private transient Pattern compiled;

  private Subscription(
      Kind kind, List<String> topics, String pattern, List<TopicPartition> assigned) {
    this.kind = kind;
    this.topics = topics;
    this.pattern = pattern;
    this.assigned = assigned;
  }

  static Subscription parse(Options options) {
    List<String> given = new ArrayList<>();
    for (String name : new String[] {"subscribe", "subscribePattern", "assign"}) {
      if (options.get(name) != null) {
        given.add(name);
      }
    }
    if (given.size() != 1) {
      String problem =
          given.isEmpty()
              ? "one of 'subscribe', 'subscribePattern' or 'assign' is required"
              : "only one of 'subscribe', 'subscribePattern' and 'assign' may be given, got '"
                  + String.join("' and '", given)
                  + "'";
      throw new OptionError(given.isEmpty() ? "subscribe" : String.join("/", given), problem);
    }
    String name = given.get(0);
    String raw = options.get(name);
    switch (name) {
      case "subscribe":
        {
          LinkedHashSet<String> topics = new LinkedHashSet<>();
          for (String t : raw.split(",", -1)) {
            if (!t.strip().isEmpty()) {
              topics.add(t.strip());
            }
          }
          if (topics.isEmpty()) {
            throw new OptionError(name, "no topic to subscribe to in '" + raw + "'");
          }
          return new Subscription(Kind.SUBSCRIBE, List.copyOf(topics), null, List.of());
        }
      case "subscribePattern":
        {
          String text = raw.strip();
          if (text.isEmpty()) {
            throw new OptionError(name, "the pattern is empty");
          }
          try {
            Pattern.compile(text);
          } catch (PatternSyntaxException e) {
            throw new OptionError(name, "not a valid regular expression: " + e.getDescription());
          }
          return new Subscription(Kind.PATTERN, List.of(), text, List.of());
        }
      default:
        {
          List<TopicPartition> assigned = Json.partitions(name, raw);
          if (assigned.isEmpty()) {
            throw new OptionError(name, "no topic-partition assigned");
          }
          return new Subscription(Kind.ASSIGN, List.of(), null, List.copyOf(assigned));
        }
    }
  }

  /** Whether a pattern subscription takes {@code topic}. */
  boolean matchesPattern(String topic) {
    if (compiled == null) {
      compiled = Pattern.compile(pattern);
    }
    return !topic.startsWith("__") && compiled.matcher(topic).matches();
  }
}
