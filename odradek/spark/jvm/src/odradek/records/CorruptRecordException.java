package odradek.records;

/** Bytes that should hold valid entries do not: the message names the file and position. */
public final class CorruptRecordException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public CorruptRecordException(String message) {
    super(message);
  }
}
