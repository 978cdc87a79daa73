"""SASL PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka speaks them,
sans-I/O: bytes in, bytes out, no sockets and no clock. The broker's authenticator and the
client both use this module; the random nonces and salts are passed in.

SCRAM in four messages (``[...]`` optional; Kafka sends no channel binding)::

    client-first  n,[a=<authzid>],n=<user>,r=<client nonce>[,<extensions>]
    server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final  c=biws,r=<nonce>,p=<base64 ClientProof>
    server-final  v=<base64 ServerSignature>

Keys, with ``H`` the mechanism's hash and ``HMAC`` over it::

    SaltedPassword  = PBKDF2-HMAC-H(password as UTF-8, salt, iterations)
    ClientKey       = HMAC(SaltedPassword, "Client Key")
    StoredKey       = H(ClientKey)                     stored by the broker
    ServerKey       = HMAC(SaltedPassword, "Server Key")   stored by the broker
    AuthMessage     = client-first-bare + "," + server-first + "," + client-final-without-proof
    ClientProof     = ClientKey XOR HMAC(StoredKey, AuthMessage)
    ServerSignature = HMAC(ServerKey, AuthMessage)

The broker keeps only ``(salt, StoredKey, ServerKey, iterations)`` (:class:`ScramCredential`),
never the password; PLAIN is checked by deriving ``StoredKey`` from the password it carries
with the stored salt and iterations. User names escape ``,`` and ``=`` as ``=2C`` and ``=3D``.
Kafka's mechanism numbers (AlterUserScramCredentials): 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Generator
from dataclasses import dataclass

__all__ = [
    "MECHANISM_IDS",
    "MIN_ITERATIONS",
    "SCRAM_MECHANISMS",
    "SaslFailure",
    "ScramClient",
    "ScramCredential",
    "ScramServer",
    "client_tokens",
    "derive_credential",
    "parse_plain",
    "verify_password",
]

SCRAM_MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISM_IDS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MIN_ITERATIONS = 4096  # Kafka's floor (and RFC 7677's recommendation)
MAX_ITERATIONS = 16384  # Kafka's ceiling


class SaslFailure(Exception):
    """Authentication failed; the message is safe to send and to log (no secret in it)."""


@dataclass(frozen=True)
class ScramCredential:
    """What the broker stores for one user and one SCRAM mechanism."""

    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.digest(key, message, hash_name)


def credential_from_salted(
    mechanism: str, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """The stored form, from ``SaltedPassword`` (what AlterUserScramCredentials carries)."""
    hash_name = SCRAM_MECHANISMS[mechanism]
    client_key = _hmac(hash_name, salted_password, b"Client Key")
    return ScramCredential(
        mechanism,
        salt,
        hashlib.new(hash_name, client_key).digest(),
        _hmac(hash_name, salted_password, b"Server Key"),
        iterations,
    )


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(SCRAM_MECHANISMS[mechanism], password.encode(), salt, iterations)


def derive_credential(
    mechanism: str, password: str, salt: bytes, iterations: int = MIN_ITERATIONS
) -> ScramCredential:
    """The stored form of ``password`` (``ValueError`` for an unknown mechanism or an
    iteration count outside Kafka's [4096, 16384])."""
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be in [{MIN_ITERATIONS}, {MAX_ITERATIONS}]")
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted(mechanism, salt, salted, iterations)


def verify_password(credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` is the one ``credential`` was derived from (constant time)."""
    again = derive_credential(
        credential.mechanism, password, credential.salt, credential.iterations
    )
    return hmac.compare_digest(again.stored_key, credential.stored_key)


def parse_plain(message: bytes) -> tuple[str, str]:
    """PLAIN's ``[authzid] NUL authcid NUL passwd``: (user, password). An authzid other
    than the user is refused, as Kafka refuses it."""
    parts = message.split(b"\0")
    if len(parts) != 3:
        raise SaslFailure("malformed PLAIN message")
    try:
        authzid, user, password = (p.decode() for p in parts)
    except UnicodeDecodeError:
        raise SaslFailure("malformed PLAIN message: not UTF-8") from None
    if not user or not password:
        raise SaslFailure("malformed PLAIN message: empty user name or password")
    if authzid and authzid != user:
        raise SaslFailure("authorization id must be empty or the user name")
    return user, password


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for item in message.split(","):
        key, sep, value = item.partition("=")
        if not sep or len(key) != 1 or key in out:
            raise SaslFailure("malformed SCRAM message")
        out[key] = value
    return out


def _unescape(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise SaslFailure("malformed SCRAM user name")
    return name.replace("=2C", ",").replace("=3D", "=")


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise SaslFailure("malformed SCRAM message: bad base64") from None


class ScramServer:
    """The broker's side of one SCRAM exchange: :meth:`first` then :meth:`final`.

    ``credential`` is looked up by the caller once :meth:`first` names the user (use
    :attr:`user`): pass None for an unknown user and the exchange goes on with a made-up
    credential, failing only at :meth:`final` with the same message as a wrong password, so
    the answers do not tell which user names exist.
    """

    def __init__(self, mechanism: str, server_nonce: str) -> None:
        self.mechanism = mechanism
        self._hash = SCRAM_MECHANISMS[mechanism]
        self._server_nonce = server_nonce
        self.user = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None

    def parse_first(self, client_first: bytes) -> str:
        """Read client-first; returns the user name (then call :meth:`first`)."""
        try:
            text = client_first.decode()
        except UnicodeDecodeError:
            raise SaslFailure("malformed SCRAM message: not UTF-8") from None
        gs2, _, authzid_rest = text.partition(",")
        if gs2 not in ("n", "y"):
            raise SaslFailure("channel binding is not supported")
        authzid, _, bare = authzid_rest.partition(",")
        attributes = _attributes(bare)
        if "n" not in attributes or "r" not in attributes:
            raise SaslFailure("malformed SCRAM client-first message")
        if set(attributes) - {"n", "r"}:
            raise SaslFailure("SCRAM extensions (delegation tokens) are not supported")
        self.user = _unescape(attributes["n"])
        if not self.user:
            raise SaslFailure("empty SCRAM user name")
        if authzid and authzid != f"a={_escape(self.user)}":
            raise SaslFailure("authorization id must be empty or the user name")
        self._client_first_bare = bare
        self._nonce = attributes["r"] + self._server_nonce
        return self.user

    def first(self, credential: ScramCredential | None, decoy_salt: bytes) -> bytes:
        """server-first, for the user's ``credential`` (None: unknown user; ``decoy_salt``
        is then shown, and should be the same for the same name every time)."""
        if credential is None or credential.mechanism != self.mechanism:
            credential = None
            salt, iterations = decoy_salt, MIN_ITERATIONS
        else:
            salt, iterations = credential.salt, credential.iterations
        self._credential = credential
        self._server_first = f"r={self._nonce},s={_b64(salt)},i={iterations}"
        return self._server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        """Check the proof in client-final; server-final, or :class:`SaslFailure`."""
        try:
            text = client_final.decode()
        except UnicodeDecodeError:
            raise SaslFailure("malformed SCRAM message: not UTF-8") from None
        without_proof, sep, proof_text = text.rpartition(",p=")
        attributes = _attributes(without_proof)
        if not sep or attributes.get("c") not in ("biws", "eSws") or "r" not in attributes:
            raise SaslFailure("malformed SCRAM client-final message")
        if not hmac.compare_digest(attributes["r"], self._nonce):
            raise SaslFailure("SCRAM nonce mismatch")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        credential = self._credential
        proof = _unb64(proof_text)
        if credential is None or len(proof) != len(credential.stored_key):
            raise SaslFailure("Authentication failed: invalid credentials")
        signature = _hmac(self._hash, credential.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        stored = hashlib.new(self._hash, client_key).digest()
        if not hmac.compare_digest(stored, credential.stored_key):
            raise SaslFailure("Authentication failed: invalid credentials")
        return f"v={_b64(_hmac(self._hash, credential.server_key, auth_message))}".encode()


class ScramClient:
    """The client's side of one SCRAM exchange: :meth:`first`, :meth:`final`, :meth:`check`."""

    def __init__(self, mechanism: str, user: str, password: str, client_nonce: str) -> None:
        self.mechanism = mechanism
        self._hash = SCRAM_MECHANISMS[mechanism]
        self._password = password
        self._client_first_bare = f"n={_escape(user)},r={client_nonce}"
        self._client_nonce = client_nonce
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        attributes = _attributes(server_first.decode())
        nonce, salt = attributes.get("r", ""), _unb64(attributes.get("s", ""))
        if not nonce.startswith(self._client_nonce) or nonce == self._client_nonce:
            raise SaslFailure("SCRAM server nonce does not extend the client's")
        iterations = int(attributes.get("i", "0"))
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise SaslFailure(f"SCRAM iteration count {iterations} out of range")
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        client_key = _hmac(self._hash, salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first.decode()},{without_proof}"
        signature = _hmac(self._hash, stored_key, auth_message.encode())
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = _hmac(self._hash, salted, b"Server Key")
        self._server_signature = _hmac(self._hash, server_key, auth_message.encode())
        return f"{without_proof},p={_b64(proof)}".encode()

    def check(self, server_final: bytes) -> None:
        """Raise :class:`SaslFailure` unless the server proved it knows the credential."""
        attributes = _attributes(server_final.decode())
        if "e" in attributes:
            raise SaslFailure(f"server refused: {attributes['e']}")
        if not hmac.compare_digest(_unb64(attributes.get("v", "")), self._server_signature):
            raise SaslFailure("SCRAM server signature mismatch")


def client_tokens(
    mechanism: str, user: str, password: str, client_nonce: str
) -> Generator[bytes, bytes, None]:
    """The client's side of a whole exchange, for any transport: yields each token to send
    (a SaslAuthenticate's bytes) and is sent the server's answer to it; returns when the
    mechanism is done. PLAIN: one token (``\\0user\\0password``); SCRAM: client-first,
    client-final, then the server-final is checked. Raises :class:`SaslFailure` (a message
    with no secret in it) or ``ValueError`` for a mechanism it does not know."""
    if mechanism == "PLAIN":
        yield b"\0" + user.encode() + b"\0" + password.encode()
        return
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"unsupported SASL mechanism {mechanism!r}")
    scram = ScramClient(mechanism, user, password, client_nonce)
    server_first = yield scram.first()
    scram.check((yield scram.final(server_first)))
