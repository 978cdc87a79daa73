package odradek.records;

import com.github.luben.zstd.ZstdInputStreamNoFinalizer;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.Arrays;
import java.util.zip.GZIPInputStream;
import org.xerial.snappy.Snappy;

/**
 * The compression codecs of a record batch (attributes bits 0-2), decompressed in the task with
 * the libraries Spark ships:
 *
 * <pre>
 *   1 gzip    java.util.zip
 *   2 snappy  xerial framing, as Kafka writes it (snappy-java):
 *               magic \x82SNAPPY\0 | version int32 | compatible int32
 *               then blocks: length int32 (big-endian) | raw snappy block
 *             a bare raw snappy block is accepted too (some non-Java clients write that)
 *   3 lz4     the LZ4 frame format ({@link Lz4Frame}: linked blocks too)
 *   4 zstd    a zstd frame (zstd-jni)
 * </pre>
 */
public final class Codecs {
  private static final byte[] XERIAL_MAGIC = {(byte) 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
  private static final int XERIAL_HEADER_BYTES = 16;

  private Codecs() {}

  /** The decompressed bytes of {@code b[at, at + length)}; a bad input is an IOException. */
  public static byte[] decompress(int codec, byte[] b, int at, int length) throws IOException {
    switch (codec) {
      case 1:
        return drain(new GZIPInputStream(new ByteArrayInputStream(b, at, length), 64 << 10));
      case 2:
        return snappy(b, at, length);
      case 3:
        return Lz4Frame.decompress(b, at, length);
      case 4:
        return drain(new ZstdInputStreamNoFinalizer(new ByteArrayInputStream(b, at, length)));
      default:
        throw new IOException("unknown compression codec " + codec);
    }
  }

  private static byte[] drain(InputStream in) throws IOException {
    try (in) {
      return in.readAllBytes();
    }
  }

  private static byte[] snappy(byte[] b, int at, int length) throws IOException {
    if (length < XERIAL_HEADER_BYTES
        || !Arrays.equals(b, at, at + XERIAL_MAGIC.length, XERIAL_MAGIC, 0, XERIAL_MAGIC.length)) {
      byte[] out = new byte[Snappy.uncompressedLength(b, at, length)];
      Snappy.uncompress(b, at, length, out, 0);
      return out;
    }
    int end = at + length;
    int p = at + XERIAL_HEADER_BYTES;
    int total = 0;
    for (int q = p; q < end; ) { // first pass: the output size
      if (end - q < 4) {
        throw new IOException("snappy: a block length is cut short");
      }
      int block = Bytes.i32(b, q);
      if (block < 0 || block > end - q - 4) {
        throw new IOException("snappy: a block of " + block + " bytes overruns the data");
      }
      total += Snappy.uncompressedLength(b, q + 4, block);
      q += 4 + block;
    }
    byte[] out = new byte[total];
    int written = 0;
    while (p < end) {
      int block = Bytes.i32(b, p);
      written += Snappy.uncompress(b, p + 4, block, out, written);
      p += 4 + block;
    }
    return out;
  }
}
