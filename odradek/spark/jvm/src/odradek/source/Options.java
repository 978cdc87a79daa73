package odradek.source;

import java.util.HashMap;
import java.util.Map;

/**
 * The options as Spark hands them over, looked up case-insensitively (Spark lower-cases the
 * keys of a {@code CaseInsensitiveStringMap}), with the integer and boolean rules of the Python
 * source's {@code options} module: errors name the option as a user spells it.
 */
public final class Options {
  private final Map<String, String> lowered = new HashMap<>();

  public Options(Map<String, String> options) {
    for (Map.Entry<String, String> e : options.entrySet()) {
      if (e.getValue() != null) {
        lowered.put(e.getKey().toLowerCase(java.util.Locale.ROOT), e.getValue());
      }
    }
  }

  public String get(String name) {
    return lowered.get(name.toLowerCase(java.util.Locale.ROOT));
  }

  /** The integer value of {@code name}, or null when absent; at least {@code minimum}. */
  public Long longValue(String name, Long minimum) {
    String raw = get(name);
    if (raw == null) {
      return null;
    }
    long value;
    try {
      value = Long.parseLong(raw.strip());
    } catch (NumberFormatException e) {
      throw new OptionError(name, "expected an integer, got '" + raw + "'");
    }
    if (minimum != null && value < minimum) {
      String what = minimum == 1 ? "a positive integer" : "an integer >= " + minimum;
      throw new OptionError(name, "must be " + what + ", got " + value);
    }
    return value;
  }

  public boolean bool(String name, boolean fallback) {
    String raw = get(name);
    if (raw == null) {
      return fallback;
    }
    String text = raw.strip().toLowerCase(java.util.Locale.ROOT);
    if (!text.equals("true") && !text.equals("false")) {
      throw new OptionError(name, "expected true or false, got '" + raw + "'");
    }
    return text.equals("true");
  }
}
