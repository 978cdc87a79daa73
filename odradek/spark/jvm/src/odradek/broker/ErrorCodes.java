package odradek.broker;

/** Kafka's error codes that the reader meets, by name (the numbers of Kafka's {@code Errors}). */
final class ErrorCodes {
  static final int NONE = 0;
  static final int OFFSET_OUT_OF_RANGE = 1;
  static final int UNKNOWN_TOPIC_OR_PARTITION = 3;

  private ErrorCodes() {}

  static String name(int code) {
    return switch (code) {
      case 1 -> "OFFSET_OUT_OF_RANGE";
      case 2 -> "CORRUPT_MESSAGE";
      case 3 -> "UNKNOWN_TOPIC_OR_PARTITION";
      case 5 -> "LEADER_NOT_AVAILABLE";
      case 6 -> "NOT_LEADER_OR_FOLLOWER";
      case 7 -> "REQUEST_TIMED_OUT";
      case 29 -> "TOPIC_AUTHORIZATION_FAILED";
      case 35 -> "UNSUPPORTED_VERSION";
      case 56 -> "KAFKA_STORAGE_ERROR";
      default -> "error code " + code;
    };
  }
}
