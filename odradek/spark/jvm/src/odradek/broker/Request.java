package odradek.broker;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A Kafka request being written: a growing byte array that starts with the size prefix and the
 * request header (v1, the header of every non-flexible version), then the body through the
 * big-endian writers below. {@link #frame} fills in the size. Kafka's non-flexible primitives:
 *
 * <pre>
 *   frame          size int32 (bytes after it) | header | body
 *   bytes          length int32 | the bytes              (nullable: length -1 for null)
 *   header v1      api_key int16 | api_version int16 | correlation_id int32 | client_id string
 *   string         length int16 | UTF-8 bytes           (nullable: length -1 for null)
 *   array          count int32 | items                  (nullable: count -1 for null)
 * </pre>
 */
final class Request {
  static final String CLIENT_ID = "odradek-jvm";
  private byte[] b = new byte[256];
  private int n;

  Request(int apiKey, int apiVersion, int correlationId) {
    int32(0); // the size, filled in by frame()
    int16(apiKey);
    int16(apiVersion);
    int32(correlationId);
    string(CLIENT_ID);
  }

  private void room(int more) {
    if (n + more > b.length) {
      b = Arrays.copyOf(b, Math.max(n + more, b.length * 2));
    }
  }

  Request int8(int v) {
    room(1);
    b[n++] = (byte) v;
    return this;
  }

  Request int16(int v) {
    room(2);
    b[n++] = (byte) (v >>> 8);
    b[n++] = (byte) v;
    return this;
  }

  Request int32(int v) {
    room(4);
    for (int shift = 24; shift >= 0; shift -= 8) {
      b[n++] = (byte) (v >>> shift);
    }
    return this;
  }

  Request int64(long v) {
    room(8);
    for (int shift = 56; shift >= 0; shift -= 8) {
      b[n++] = (byte) (v >>> shift);
    }
    return this;
  }

  Request string(String s) {
    byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
    int16(utf8.length);
    room(utf8.length);
    System.arraycopy(utf8, 0, b, n, utf8.length);
    n += utf8.length;
    return this;
  }

  /** A non-null {@code bytes} field: length int32, then the bytes. */
  Request bytes(byte[] data) {
    int32(data.length);
    room(data.length);
    System.arraycopy(data, 0, b, n, data.length);
    n += data.length;
    return this;
  }

  /** The whole frame, its size prefix filled in; the array may be longer than {@link #size}. */
  byte[] frame() {
    int body = n - 4;
    b[0] = (byte) (body >>> 24);
    b[1] = (byte) (body >>> 16);
    b[2] = (byte) (body >>> 8);
    b[3] = (byte) body;
    return b;
  }

  int size() {
    return n;
  }
}
