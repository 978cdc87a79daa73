package odradek.broker;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import javax.net.ssl.SSLSocketFactory;

/**
 * One blocking connection to the broker's Kafka listener, as a task or the driver holds it: a
 * request is written whole, then its response read whole into a buffer that the connection
 * keeps and reuses (so a Fetch response's record bytes are decoded where they landed; they stay
 * valid until the next receive). Requests may be pipelined ({@link #send} before the previous
 * response is read); responses come back in order, each correlation id checked against its
 * request's. Not thread-safe.
 *
 * <p>With {@code kafka.security.protocol=SSL} or {@code SASL_SSL} the TCP connection is wrapped in
 * TLS ({@link Tls}); with {@code SASL_*} it then authenticates ({@link Sasl}).
 * Connecting tries each {@code host:port} of {@code kafka.bootstrap.servers} in order (the
 * broker is a single node, so every address reaches the same one); when none answers, the error
 * names every address tried and why.
 */
final class KafkaConnection implements AutoCloseable {
  static final int CONNECT_TIMEOUT_MS = 10_000;
  /** The longest a response may take: far above a Fetch's max_wait_ms. */
  static final int READ_TIMEOUT_MS = 120_000;

  private final Socket socket;
  private final DataInputStream in;
  private final OutputStream out;
  private final String address;
  private byte[] buf = new byte[64 << 10];
  private int correlation;
  private final ArrayDeque<Integer> pending = new ArrayDeque<>(); // sent, not yet received

  private KafkaConnection(Socket socket, String address) throws IOException {
    this.socket = socket;
    this.address = address;
    socket.setTcpNoDelay(true);
    socket.setSoTimeout(READ_TIMEOUT_MS);
    in = new DataInputStream(socket.getInputStream());
    out = socket.getOutputStream();
  }

  /**
   * A connection to the first of the options' servers that accepts one, with TLS and SASL as
   * they say ({@link Tls}, {@link Sasl}: a failed authentication is a {@link SecurityException},
   * not tried on the next address).
   */
  static KafkaConnection open(BrokerOptions options) {
    KafkaConnection conn = open(options.servers, Tls.factory(options));
    if (options.saslMechanism != null) {
      try {
        Sasl.authenticate(conn, options);
      } catch (RuntimeException e) {
        conn.close();
        throw e;
      }
    }
    return conn;
  }

  /** A connection to the first of {@code servers} that accepts one. */
  private static KafkaConnection open(List<String> servers, SSLSocketFactory tls) {
    List<String> failures = new ArrayList<>();
    for (String server : servers) {
      int colon = server.lastIndexOf(':');
      String host = server.substring(0, colon);
      int port = Integer.parseInt(server.substring(colon + 1));
      Socket socket = null;
      try {
        socket = new Socket();
        socket.connect(new InetSocketAddress(host, port), CONNECT_TIMEOUT_MS);
        socket.setSoTimeout(CONNECT_TIMEOUT_MS); // the TLS handshake's bound
        if (tls != null) {
          socket = Tls.wrap(tls, socket, host, port);
        }
        return new KafkaConnection(socket, server);
      } catch (IOException | UncheckedIOException e) {
        Throwable cause = e instanceof UncheckedIOException u ? u.getCause() : e;
        failures.add(server + " (" + cause + ")");
        if (socket != null) {
          try {
            socket.close();
          } catch (IOException ignored) {
            // already failing: the connect error is the one reported
          }
        }
      }
    }
    throw new UncheckedIOException(
        new IOException(
            "cannot connect to the broker at " + String.join(", ", failures)
                + " (option kafka.bootstrap.servers)"));
  }

  String address() {
    return address;
  }

  int nextCorrelationId() {
    return ++correlation;
  }

  /**
   * Sends {@code request} and reads its response; the returned cursor is past the response
   * header and valid until the next call.
   */
  Response call(Request request) {
    send(request);
    return receive();
  }

  /**
   * Writes {@code request} without waiting for its response: responses come back in request
   * order, each read by one {@link #receive} (a task pipelines its next Fetch this way).
   */
  void send(Request request) {
    try {
      out.write(request.frame(), 0, request.size());
      out.flush();
    } catch (IOException e) {
      throw new UncheckedIOException("the broker at " + address + ": " + e.getMessage(), e);
    }
    pending.addLast(correlation);
  }

  /** Whether a request sent is still waiting for {@link #receive}. */
  boolean awaiting() {
    return !pending.isEmpty();
  }

  /** The response to the oldest request sent and not yet received. */
  Response receive() {
    int correlationId = pending.removeFirst();
    try {
      int size = in.readInt();
      if (size < 4) {
        throw new ProtocolException(address + ": a response of " + size + " bytes");
      }
      if (size > buf.length) {
        buf = new byte[Math.max(size, buf.length * 2)];
      }
      in.readFully(buf, 0, size);
      Response response = new Response(buf, 0, size);
      int got = response.int32();
      if (got != correlationId) {
        throw new ProtocolException(
            address + ": response to correlation id " + got + ", expected " + correlationId);
      }
      return response;
    } catch (IOException e) {
      throw new UncheckedIOException("the broker at " + address + ": " + e.getMessage(), e);
    }
  }

  @Override
  public void close() {
    try {
      socket.close();
    } catch (IOException ignored) {
      // closing: nothing left to read or write
    }
  }
}
