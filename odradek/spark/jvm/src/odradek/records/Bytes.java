package odradek.records;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/** Big-endian integers at a byte index of a {@code byte[]} (Kafka's byte order). */
public final class Bytes {
  private static final VarHandle I16 =
      MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.BIG_ENDIAN);
  private static final VarHandle I32 =
      MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.BIG_ENDIAN);
  private static final VarHandle I64 =
      MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

  private Bytes() {}

  public static short i16(byte[] b, int at) {
    return (short) I16.get(b, at);
  }

  public static int i32(byte[] b, int at) {
    return (int) I32.get(b, at);
  }

  public static long i64(byte[] b, int at) {
    return (long) I64.get(b, at);
  }
}
