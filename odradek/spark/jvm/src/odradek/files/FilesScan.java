package odradek.files;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import odradek.source.ColumnarScan;
import odradek.source.Offsets;
import odradek.source.TopicPartition;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * One query's read of the log directories: the shared {@link ColumnarScan} (pruned schema,
 * reader factory) with the plan made on the driver (the Python {@code
 * FilesBatchReader.partitions}) and the columnar readers ({@link RangeReader}).
 *
 * <p>Planning: {@link LogDirs} lists the roots, {@link Offsets#discover} the subscribed
 * partitions (each must have a directory), {@link Offsets#ranges} resolves the offsets, {@link
 * Offsets#split} applies {@code maxRecordsPerPartition} / {@code minPartitions}, and {@link
 * FilePlanner} cuts each range into tasks by segment and {@code maxPartitionBytes}.
 */
public final class FilesScan extends ColumnarScan<FilesOptions> {
  private static final long serialVersionUID = 1L;

  FilesScan(StructType schema, FilesOptions options) {
    super(schema, options, FilesSource.NAME + " [" + String.join(",", options.logDirs) + "]");
  }

  @Override
  public InputPartition[] planInputPartitions() {
    LogDirs dirs = new LogDirs(options.logDirs);
    List<TopicPartition> tps = Offsets.discover(dirs, options.subscription);
    for (TopicPartition tp : tps) {
      dirs.partitionLog(tp); // a missing partition directory fails here, naming log.dirs
    }
    List<FileRange> tasks = new ArrayList<>();
    List<Offsets.Range> ranges =
        Offsets.split(
            Offsets.ranges(dirs, options, tps),
            options.minPartitions,
            options.maxRecordsPerPartition);
    try {
      for (Offsets.Range range : ranges) {
        tasks.addAll(
            FilePlanner.plan(
                dirs.partitionLog(range.tp()),
                range,
                options.maxPartitionBytes,
                options.readCommitted));
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return tasks.toArray(new InputPartition[0]);
  }

  @Override
  protected PartitionReader<ColumnarBatch> open(InputPartition task) {
    return new RangeReader((FileRange) task, options, schema);
  }
}
