package odradek.broker;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.util.Collection;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManagerFactory;
import odradek.source.OptionError;

/**
 * {@code kafka.security.protocol=SSL} or {@code SASL_SSL}: a connected TCP socket is wrapped in
 * TLS, the broker's certificate checked against {@code kafka.ssl.truststore.location} (a PEM
 * file of one or more CA certificates, as odradek's own {@code ssl.truststore.location};
 * without it, the JVM's default trust store) and its host name against the certificate (Kafka's
 * default {@code ssl.endpoint.identification.algorithm=https}). No client certificate is sent.
 * The factory is built per connection, on the executor that connects.
 */
final class Tls {
  private Tls() {}

  /** The factory of TLS sockets the options ask for, or null for PLAINTEXT. */
  static SSLSocketFactory factory(BrokerOptions options) {
    if (!options.ssl) {
      return null;
    }
    if (options.truststore == null) {
      return (SSLSocketFactory) SSLSocketFactory.getDefault();
    }
    try (InputStream pem = Files.newInputStream(Path.of(options.truststore))) {
      Collection<? extends Certificate> certs =
          CertificateFactory.getInstance("X.509").generateCertificates(pem);
      if (certs.isEmpty()) {
        throw new OptionError(
            "kafka.ssl.truststore.location", "no certificate in " + options.truststore);
      }
      KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
      store.load(null, null);
      int i = 0;
      for (Certificate cert : certs) {
        store.setCertificateEntry("ca-" + i++, cert);
      }
      TrustManagerFactory trust =
          TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      trust.init(store);
      SSLContext context = SSLContext.getInstance("TLS");
      context.init(null, trust.getTrustManagers(), null);
      return context.getSocketFactory();
    } catch (IOException e) {
      throw new OptionError(
          "kafka.ssl.truststore.location", "cannot read " + options.truststore + ": " + e);
    } catch (GeneralSecurityException e) {
      throw new OptionError(
          "kafka.ssl.truststore.location", "not PEM certificates: " + options.truststore + ": " + e);
    }
  }

  /** {@code plain}, connected to {@code host:port}, with a finished TLS handshake over it. */
  static Socket wrap(SSLSocketFactory factory, Socket plain, String host, int port) {
    try {
      SSLSocket socket = (SSLSocket) factory.createSocket(plain, host, port, true);
      SSLParameters parameters = socket.getSSLParameters();
      parameters.setEndpointIdentificationAlgorithm("HTTPS");
      socket.setSSLParameters(parameters);
      socket.startHandshake();
      return socket;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
