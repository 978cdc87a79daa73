package odradek.broker;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import javax.crypto.Mac;
import javax.crypto.SecretKeyFactory;
import javax.crypto.spec.PBEKeySpec;
import javax.crypto.spec.SecretKeySpec;

/**
 * SASL on a new connection ({@code kafka.security.protocol=SASL_PLAINTEXT} or {@code SASL_SSL}),
 * as Kafka's clients authenticate: SaslHandshake v1, then SaslAuthenticate v1 with each token of
 * the mechanism until it is done. Layouts (non-flexible):
 *
 * <pre>
 *   SaslHandshake v1 (key 17)     request: mechanism string
 *                                 response: error_code int16 | mechanisms [string]
 *   SaslAuthenticate v1 (key 36)  request: auth_bytes bytes
 *                                 response: error_code int16 | error_message string (nullable) |
 *                                           auth_bytes bytes | session_lifetime_ms int64
 * </pre>
 *
 * <p>{@code PLAIN}: one token, {@code \0user\0password}. {@code SCRAM-SHA-256} / {@code -512}
 * (RFC 5802, RFC 7677, no channel binding, as Kafka):
 *
 * <pre>
 *   client-first  n,,n=user,r=cnonce         server-first  r=cnonce+snonce,s=salt,i=iterations
 *   client-final  c=biws,r=nonce,p=proof     server-final  v=ServerSignature
 *   SaltedPassword = PBKDF2-HMAC(password, salt, iterations); ClientKey = HMAC(SaltedPassword,
 *   "Client Key"); StoredKey = H(ClientKey); AuthMessage = client-first-bare "," server-first ","
 *   client-final-without-proof; proof = ClientKey XOR HMAC(StoredKey, AuthMessage);
 *   ServerSignature = HMAC(HMAC(SaltedPassword, "Server Key"), AuthMessage)
 * </pre>
 *
 * A refusal or a server that does not prove it knows the credential is a {@link
 * SecurityException} naming the broker and the mechanism, never the password.
 */
final class Sasl {
  static final int HANDSHAKE = 17;
  static final int AUTHENTICATE = 36;
  private static final int MIN_ITERATIONS = 4096;
  private static final int MAX_ITERATIONS = 16384;

  private Sasl() {}

  static void authenticate(KafkaConnection conn, BrokerOptions options) {
    String mechanism = options.saslMechanism;
    Request handshake = new Request(HANDSHAKE, 1, conn.nextCorrelationId()).string(mechanism);
    Response answer = conn.call(handshake);
    int error = answer.int16();
    if (error != 0) {
      StringBuilder enabled = new StringBuilder();
      for (int i = answer.count(); i > 0; i--) {
        enabled.append(enabled.length() == 0 ? "" : ", ").append(answer.string());
      }
      throw refused(conn, mechanism, "the mechanism is not enabled (enabled: " + enabled + ")");
    }
    String user = options.saslUsername;
    String password = options.saslPassword;
    if (mechanism.equals("PLAIN")) {
      step(conn, mechanism, ("\0" + user + "\0" + password).getBytes(StandardCharsets.UTF_8));
      return;
    }
    String hash = mechanism.equals("SCRAM-SHA-512") ? "SHA-512" : "SHA-256";
    String mac = mechanism.equals("SCRAM-SHA-512") ? "HmacSHA512" : "HmacSHA256";
    byte[] random = new byte[18];
    new SecureRandom().nextBytes(random);
    String clientNonce = Base64.getUrlEncoder().withoutPadding().encodeToString(random);
    String clientFirstBare =
        "n=" + user.replace("=", "=3D").replace(",", "=2C") + ",r=" + clientNonce;
    String serverFirst =
        new String(step(conn, mechanism, ("n,," + clientFirstBare).getBytes(StandardCharsets.UTF_8)),
            StandardCharsets.UTF_8);
    Map<String, String> first = attributes(serverFirst);
    String nonce = first.getOrDefault("r", "");
    if (!nonce.startsWith(clientNonce) || nonce.equals(clientNonce)) {
      throw refused(conn, mechanism, "the server nonce does not extend the client's");
    }
    int iterations = Integer.parseInt(first.getOrDefault("i", "0"));
    if (iterations < MIN_ITERATIONS || iterations > MAX_ITERATIONS) {
      throw refused(conn, mechanism, "iteration count " + iterations + " out of range");
    }
    byte[] salt = Base64.getDecoder().decode(first.getOrDefault("s", ""));
    try {
      byte[] salted = pbkdf2(mac, password, salt, iterations, hash.equals("SHA-512") ? 512 : 256);
      byte[] clientKey = hmac(mac, salted, "Client Key");
      byte[] storedKey = MessageDigest.getInstance(hash).digest(clientKey);
      String withoutProof = "c=biws,r=" + nonce;
      byte[] authMessage =
          (clientFirstBare + "," + serverFirst + "," + withoutProof)
              .getBytes(StandardCharsets.UTF_8);
      byte[] proof = hmac(mac, storedKey, authMessage);
      for (int i = 0; i < proof.length; i++) {
        proof[i] ^= clientKey[i];
      }
      String clientFinal = withoutProof + ",p=" + Base64.getEncoder().encodeToString(proof);
      byte[] serverFinal = step(conn, mechanism, clientFinal.getBytes(StandardCharsets.UTF_8));
      Map<String, String> last = attributes(new String(serverFinal, StandardCharsets.UTF_8));
      byte[] expected = hmac(mac, hmac(mac, salted, "Server Key"), authMessage);
      if (!MessageDigest.isEqual(expected, Base64.getDecoder().decode(last.getOrDefault("v", "")))) {
        throw refused(conn, mechanism, "the server's signature does not match");
      }
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(mechanism + " is not available in this JVM", e);
    }
  }

  /** One SaslAuthenticate: sends {@code token}, returns the broker's answer. */
  private static byte[] step(KafkaConnection conn, String mechanism, byte[] token) {
    Request request = new Request(AUTHENTICATE, 1, conn.nextCorrelationId()).bytes(token);
    Response answer = conn.call(request);
    int error = answer.int16();
    String message = answer.string();
    if (error != 0) {
      throw refused(conn, mechanism, message == null ? ErrorCodes.name(error) : message);
    }
    int at = answer.bytes();
    return answer.lastLength < 0 ? new byte[0] : Arrays.copyOfRange(answer.b, at, at + answer.lastLength);
  }

  private static SecurityException refused(KafkaConnection conn, String mechanism, String why) {
    return new SecurityException(
        "SASL " + mechanism + " authentication with the broker at " + conn.address()
            + " failed: " + why + " (options kafka.sasl.*)");
  }

  private static Map<String, String> attributes(String message) {
    Map<String, String> out = new HashMap<>();
    for (String item : message.split(",")) {
      int eq = item.indexOf('=');
      if (eq > 0) {
        out.put(item.substring(0, eq), item.substring(eq + 1));
      }
    }
    return out;
  }

  private static byte[] pbkdf2(String mac, String password, byte[] salt, int iterations, int bits)
      throws GeneralSecurityException {
    PBEKeySpec spec = new PBEKeySpec(password.toCharArray(), salt, iterations, bits);
    try {
      return SecretKeyFactory.getInstance("PBKDF2With" + mac).generateSecret(spec).getEncoded();
    } finally {
      spec.clearPassword();
    }
  }

  private static byte[] hmac(String mac, byte[] key, String message)
      throws GeneralSecurityException {
    return hmac(mac, key, message.getBytes(StandardCharsets.UTF_8));
  }

  private static byte[] hmac(String mac, byte[] key, byte[] message)
      throws GeneralSecurityException {
    Mac m = Mac.getInstance(mac);
    m.init(new SecretKeySpec(key, mac));
    return m.doFinal(message);
  }
}
