package odradek.source;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Spark's {@code failOnDataLoss}: records a read should return are gone (retention, a deleted
 * topic). True raises {@link DataLossException}; false logs a warning and the read goes on.
 */
public final class DataLoss {
  private static final Logger LOG = LoggerFactory.getLogger(DataLoss.class);
  /** Where the records were looked for, as the hint says it ({@link Cluster#where}). */
  public static final String LOG_DIRS = "in the log directories";

  public static final String BROKER = "in the broker";

  private DataLoss() {}

  /** The error {@code failOnDataLoss=true} raises. */
  static final class DataLossException extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    DataLossException(String message) {
      super(message);
    }
  }

  /** Raises or warns ({@code failOnDataLoss}); {@code where}: {@link #LOG_DIRS} or {@link #BROKER}. */
  public static void report(boolean fail, String message, String where) {
    String hint =
        " Some data may have been lost because they are not available " + where
            + " any more: either aged out by retention or the topic was deleted before all of it"
            + " was processed.";
    if (fail) {
      throw new DataLossException(
          message + hint + " If you want the query to go on, set failOnDataLoss=false.");
    }
    LOG.warn("{}{} Going on because failOnDataLoss=false.", message, hint);
  }
}
