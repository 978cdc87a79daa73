package odradek.broker;

/** The broker's answer does not parse as the request's version says it should. */
final class ProtocolException extends IllegalStateException {
  private static final long serialVersionUID = 1L;

  ProtocolException(String message) {
    super(message);
  }
}
