package odradek.source;

import java.util.Map;

/**
 * The two questions planning asks of where the records are (the Python source's {@code
 * metadata.Cluster}): which topics exist, with how many partitions, and ListOffsets. The file
 * reader answers from the log directories, the broker reader with Metadata and ListOffsets
 * requests. Driver side only.
 */
public interface Cluster {
  /** Every topic and its number of partitions. */
  Map<String, Integer> topics();

  /**
   * ListOffsets for each key: {@link Offsets#EARLIEST} (the log start offset), {@link
   * Offsets#LATEST} (the log end offset), else a timestamp in ms: the first offset whose record
   * timestamp is at least it. Every key is in the answer; null where there is no such offset
   * (no record that recent, an unknown partition).
   */
  Map<TopicPartition, Long> listOffsets(Map<TopicPartition, Long> query);

  /** Where the records are, for data-loss messages: {@link DataLoss#LOG_DIRS} or {@link DataLoss#BROKER}. */
  String where();
}
