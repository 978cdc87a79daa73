package odradek.files;

import java.io.Serializable;
import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One Spark task: records {@code fromOffset <= offset < untilOffset} of one topic-partition,
 * found in bytes {@code [startPosition, endPosition)} of the segment file {@code path} (device,
 * inode: the file as planned). {@code aborted} holds the aborted transactions overlapping the
 * offsets (producer id, first offset, last offset), flattened, empty for read_uncommitted.
 */
public record FileRange(
    String topic,
    int partition,
    String path,
    long baseOffset,
    long device,
    long inode,
    long fromOffset,
    long untilOffset,
    long startPosition,
    long endPosition,
    long[] aborted)
    implements InputPartition, Serializable {

  boolean isAborted(long producerId, long baseOffset) {
    for (int i = 0; i < aborted.length; i += 3) {
      if (aborted[i] == producerId && aborted[i + 1] <= baseOffset && baseOffset <= aborted[i + 2]) {
        return true;
      }
    }
    return false;
  }
}
