package odradek.broker;

import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import odradek.records.EntryDecoder;

/**
 * read_committed over one Fetch response, as Kafka's consumer does it: the response lists the
 * aborted transactions that overlap the fetched range as (producer id, first offset). Walking the
 * batches in offset order, a transaction becomes open once a batch's last offset reaches its
 * first offset; a transactional batch of a producer with an open aborted transaction is left
 * out; that producer's next control batch (its abort marker) closes it. The state lives for one
 * response: the next Fetch lists again what overlaps its own range.
 */
public final class AbortedTransactions implements EntryDecoder.Aborted {
  private final long[] producerIds; // sorted by first offset, with firstOffsets
  private final long[] firstOffsets;
  private int next;
  private final Set<Long> open = new HashSet<>();

  /** {@code pairs}: producer id, first offset, ... as the Fetch response lists them. */
  public AbortedTransactions(long[] pairs) {
    Integer[] order = new Integer[pairs.length / 2];
    for (int i = 0; i < order.length; i++) {
      order[i] = i;
    }
    Arrays.sort(order, (a, b) -> Long.compare(pairs[2 * a + 1], pairs[2 * b + 1]));
    producerIds = new long[order.length];
    firstOffsets = new long[order.length];
    for (int i = 0; i < order.length; i++) {
      producerIds[i] = pairs[2 * order[i]];
      firstOffsets[i] = pairs[2 * order[i] + 1];
    }
  }

  /** Whether there is nothing to leave out (read_uncommitted, or no aborted transaction). */
  boolean none() {
    return producerIds.length == 0;
  }

  @Override
  public boolean skip(long producerId, long baseOffset, boolean control) {
    while (next < firstOffsets.length && firstOffsets[next] <= baseOffset) {
      open.add(producerIds[next++]);
    }
    if (control) {
      open.remove(producerId); // the marker ends the transaction (an abort, if it was open)
      return true;
    }
    return open.contains(producerId);
  }
}
