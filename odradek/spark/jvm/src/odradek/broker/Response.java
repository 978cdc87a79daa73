package odradek.broker;

import java.nio.charset.StandardCharsets;
import odradek.records.Bytes;

/**
 * A Kafka response being read: a cursor over the body (after the size prefix and the v0
 * response header, {@code correlation_id int32}) with the big-endian readers of {@link
 * Request}'s primitives. A read past the end is a {@link ProtocolException}: the broker sent
 * less than the version's layout says.
 */
final class Response {
  final byte[] b;
  int p;
  final int end;
  /** The length {@link #bytes} read last (-1: null). */
  int lastLength;

  Response(byte[] b, int p, int end) {
    this.b = b;
    this.p = p;
    this.end = end;
  }

  private int take(int bytes) {
    if (bytes < 0 || end - p < bytes) {
      throw new ProtocolException("the response ends early (" + bytes + " bytes wanted at " + p + ")");
    }
    int at = p;
    p += bytes;
    return at;
  }

  byte int8() {
    return b[take(1)];
  }

  short int16() {
    return Bytes.i16(b, take(2));
  }

  int int32() {
    return Bytes.i32(b, take(4));
  }

  long int64() {
    return Bytes.i64(b, take(8));
  }

  /** A nullable string (null for length -1). */
  String string() {
    int length = int16();
    if (length < 0) {
      return null;
    }
    int at = take(length);
    return new String(b, at, length, StandardCharsets.UTF_8);
  }

  /** An array's count (-1 for null, read as 0). */
  int count() {
    int count = int32();
    if (count > end - p) { // every item takes at least one byte
      throw new ProtocolException("an array of " + count + " items in " + (end - p) + " bytes");
    }
    return Math.max(count, 0);
  }

  /** Skips an array of fixed-size items. */
  void skipArray(int itemBytes) {
    take(count() * itemBytes);
  }

  /** A nullable bytes field: its position, with its length in {@link #lastLength} (-1: null). */
  int bytes() {
    lastLength = int32();
    return lastLength < 0 ? p : take(lastLength);
  }
}
