package odradek.files;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Spark's {@code failOnDataLoss}: records a read should return are gone (retention, a deleted
 * topic). True raises {@link DataLossException}; false logs a warning and the read goes on.
 */
final class DataLoss {
  private static final Logger LOG = LoggerFactory.getLogger(DataLoss.class);
  private static final String HINT =
      " Some data may have been lost because they are not available in the log directories"
          + " any more: either aged out by retention or the topic was deleted before all of it"
          + " was processed.";

  private DataLoss() {}

  /** The error {@code failOnDataLoss=true} raises. */
  static final class DataLossException extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    DataLossException(String message) {
      super(message);
    }
  }

  static void report(boolean fail, String message) {
    if (fail) {
      throw new DataLossException(
          message + HINT + " If you want the query to go on, set failOnDataLoss=false.");
    }
    LOG.warn("{}{} Going on because failOnDataLoss=false.", message, HINT);
  }
}
