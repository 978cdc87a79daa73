package odradek.records;

import java.io.IOException;
import java.util.Arrays;
import net.jpountz.xxhash.XXHash32;
import net.jpountz.xxhash.XXHashFactory;

/**
 * An LZ4 frame (the lz4 frame format spec) decoded into one contiguous array, so blocks that
 * depend on earlier blocks (linked blocks, which lz4-java's frame stream refuses and Python's
 * lz4/cramjam write by default) simply refer back into it. Little-endian throughout:
 *
 * <pre>
 *   magic 0x184D2204 | FLG | BD | [content size u64 if FLG bit 3] | [dict id u32 if FLG bit 0]
 *   | HC = (xxh32(FLG..last descriptor byte, seed 0) &gt;&gt; 8) &amp; 0xFF
 *   blocks: size u32 (bit 31: stored uncompressed; 0 ends the frame) | data
 *           | [xxh32 of data if FLG bit 4]
 *   [content checksum u32 = xxh32(all output) if FLG bit 2]
 * </pre>
 *
 * An LZ4 block is a run of sequences: token (literal length high nibble, match length - 4 low
 * nibble; 15 means more length bytes follow, each added, until one below 255), literals,
 * then, except in the last sequence, a match offset u16 (1..output so far) and the match copied
 * byte by byte from that far back (it may overlap its own output). Skippable frames (magic
 * 0x184D2A5?) and dictionaries are refused; concatenated frames are decoded in turn.
 */
final class Lz4Frame {
  private static final int MAGIC = 0x184D2204;
  private static final XXHash32 XXH = XXHashFactory.fastestJavaInstance().hash32();

  private byte[] out = new byte[64 << 10];
  private int n;

  private Lz4Frame() {}

  static byte[] decompress(byte[] b, int at, int length) throws IOException {
    Lz4Frame f = new Lz4Frame();
    int end = at + length;
    int p = at;
    do {
      p = f.frame(b, p, end);
    } while (p < end);
    return Arrays.copyOf(f.out, f.n);
  }

  private static int le32(byte[] b, int p) {
    return (b[p] & 0xff) | (b[p + 1] & 0xff) << 8 | (b[p + 2] & 0xff) << 16 | (b[p + 3] & 0xff) << 24;
  }

  private static void need(int p, int bytes, int end) throws IOException {
    if (bytes < 0 || p + bytes > end) {
      throw new IOException("lz4: frame cut short");
    }
  }

  private int frame(byte[] b, int p, int end) throws IOException {
    need(p, 7, end);
    if (le32(b, p) != MAGIC) {
      throw new IOException("lz4: bad frame magic");
    }
    int descriptor = p + 4;
    int flg = b[descriptor] & 0xff;
    if ((flg >>> 6) != 1 || (flg & 0x02) != 0) {
      throw new IOException("lz4: unsupported frame version or flags");
    }
    if ((flg & 0x01) != 0) {
      throw new IOException("lz4: frames with a dictionary are not supported");
    }
    int headerEnd = descriptor + 2 + ((flg & 0x08) != 0 ? 8 : 0);
    need(headerEnd, 1, end);
    int hc = (XXH.hash(b, descriptor, headerEnd - descriptor, 0) >>> 8) & 0xff;
    if (hc != (b[headerEnd] & 0xff)) {
      throw new IOException("lz4: bad frame header checksum");
    }
    boolean blockChecksums = (flg & 0x10) != 0;
    int frameStart = n;
    p = headerEnd + 1;
    while (true) {
      need(p, 4, end);
      int size = le32(b, p);
      p += 4;
      if (size == 0) {
        break;
      }
      int bytes = size & 0x7fffffff;
      need(p, bytes + (blockChecksums ? 4 : 0), end);
      if (blockChecksums && XXH.hash(b, p, bytes, 0) != le32(b, p + bytes)) {
        throw new IOException("lz4: bad block checksum");
      }
      if (size < 0) { // stored uncompressed
        grow(bytes);
        System.arraycopy(b, p, out, n, bytes);
        n += bytes;
      } else {
        block(b, p, p + bytes);
      }
      p += bytes + (blockChecksums ? 4 : 0);
    }
    if ((flg & 0x04) != 0) {
      need(p, 4, end);
      if (XXH.hash(out, frameStart, n - frameStart, 0) != le32(b, p)) {
        throw new IOException("lz4: bad content checksum");
      }
      p += 4;
    }
    return p;
  }

  private void grow(int more) {
    if (n + more > out.length) {
      out = Arrays.copyOf(out, Math.max(n + more, out.length * 2));
    }
  }

  private void block(byte[] b, int p, int end) throws IOException {
    while (true) {
      if (p >= end) {
        throw new IOException("lz4: block cut short");
      }
      int token = b[p++] & 0xff;
      int literals = token >>> 4;
      if (literals == 15) {
        int more;
        do {
          if (p >= end) {
            throw new IOException("lz4: block cut short");
          }
          more = b[p++] & 0xff;
          literals += more;
        } while (more == 255);
      }
      if (literals > end - p) {
        throw new IOException("lz4: literals overrun the block");
      }
      grow(literals);
      System.arraycopy(b, p, out, n, literals);
      n += literals;
      p += literals;
      if (p == end) {
        return; // the last sequence has literals only
      }
      if (end - p < 2) {
        throw new IOException("lz4: block cut short");
      }
      int offset = (b[p] & 0xff) | (b[p + 1] & 0xff) << 8;
      p += 2;
      int match = token & 0x0f;
      if (match == 15) {
        int more;
        do {
          if (p >= end) {
            throw new IOException("lz4: block cut short");
          }
          more = b[p++] & 0xff;
          match += more;
        } while (more == 255);
      }
      match += 4;
      if (offset == 0 || offset > n) {
        throw new IOException("lz4: match offset " + offset + " out of range");
      }
      grow(match);
      int from = n - offset;
      if (offset >= match) {
        System.arraycopy(out, from, out, n, match);
      } else {
        for (int i = 0; i < match; i++) {
          out[n + i] = out[from + i];
        }
      }
      n += match;
    }
  }
}
