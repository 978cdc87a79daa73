"""SASL PLAIN and SCRAM (protocol/sasl.py): RFC 7677's SCRAM-SHA-256 example byte for byte,
both mechanisms end to end, and every way an exchange must fail."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.sasl import (
    SaslFailure,
    ScramClient,
    ScramServer,
    derive_credential,
    parse_plain,
    verify_password,
)

# RFC 7677 §3: user "user", password "pencil"
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_rfc7677_example() -> None:
    credential = derive_credential("SCRAM-SHA-256", "pencil", SALT, 4096)
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", CLIENT_NONCE)
    server = ScramServer("SCRAM-SHA-256", SERVER_NONCE)
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert server.parse_first(client.first()) == "user"
    server_first = server.first(credential, b"decoy")
    assert server_first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert client.final(server_first) == CLIENT_FINAL
    assert server.final(CLIENT_FINAL) == SERVER_FINAL
    client.check(SERVER_FINAL)


def _exchange(mechanism: str, user: str, stored_password: str, password: str) -> None:
    credential = derive_credential(mechanism, stored_password, b"salt-1234", 4096)
    client = ScramClient(mechanism, user, password, "cnonce")
    server = ScramServer(mechanism, "snonce")
    assert server.parse_first(client.first()) == user
    server_final = server.final(client.final(server.first(credential, b"decoy")))
    client.check(server_final)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_right_and_wrong_passwords(mechanism: str) -> None:
    _exchange(mechanism, "alice", "s3cret", "s3cret")
    with pytest.raises(SaslFailure, match="invalid credentials") as wrong:
        _exchange(mechanism, "alice", "s3cret", "guess")
    assert "s3cret" not in str(wrong.value) and "guess" not in str(wrong.value)


@settings(max_examples=25, deadline=None)
@given(st.text(min_size=1, max_size=20).filter(lambda s: "\0" not in s))
def test_any_user_name_round_trips(user: str) -> None:  # "," and "=" are escaped
    _exchange("SCRAM-SHA-256", user, "pw", "pw")


def test_an_unknown_user_fails_like_a_wrong_password() -> None:
    client = ScramClient("SCRAM-SHA-256", "nobody", "pw", "cnonce")
    server = ScramServer("SCRAM-SHA-256", "snonce")
    server.parse_first(client.first())
    server_first = server.first(None, b"decoy-salt")
    assert b"s=" + base64.b64encode(b"decoy-salt") in server_first
    with pytest.raises(SaslFailure, match="invalid credentials"):
        server.final(client.final(server_first))


@pytest.mark.parametrize(
    "first",
    [
        b"p=tls-unique,,n=a,r=x",  # channel binding
        b"n,,n=a",  # no nonce
        b"n,,r=x",  # no user
        b"n,,n=a,r=x,tokenauth=true",  # delegation tokens
        b"n,a=bob,n=alice,r=x",  # impersonation
        b"n,,n=a=b,r=x",  # a bad escape
        b"\xff",
    ],
)
def test_malformed_client_first(first: bytes) -> None:
    with pytest.raises(SaslFailure):
        ScramServer("SCRAM-SHA-256", "s").parse_first(first)


def test_a_replayed_nonce_or_a_forged_proof_fails() -> None:
    credential = derive_credential("SCRAM-SHA-512", "pw", b"salt", 4096)
    server = ScramServer("SCRAM-SHA-512", "snonce")
    server.parse_first(b"n,,n=u,r=cnonce")
    server.first(credential, b"decoy")
    with pytest.raises(SaslFailure, match="nonce"):
        server.final(b"c=biws,r=cnonceOTHER,p=" + base64.b64encode(b"x" * 64))
    with pytest.raises(SaslFailure, match="invalid credentials"):
        server.final(b"c=biws,r=cnoncesnonce,p=" + base64.b64encode(b"x" * 64))


def test_plain() -> None:
    assert parse_plain(b"\0alice\0pw") == ("alice", "pw")
    assert parse_plain(b"alice\0alice\0pw") == ("alice", "pw")
    for bad in (b"alice\0pw", b"bob\0alice\0pw", b"\0\0pw", b"\0alice\0", b"\0\xff\0pw"):
        with pytest.raises(SaslFailure):
            parse_plain(bad)
    credential = derive_credential("SCRAM-SHA-256", "pw", b"salt", 4096)
    assert verify_password(credential, "pw")
    assert not verify_password(credential, "pW")


def test_iterations_are_bounded_as_kafka_bounds_them() -> None:
    for iterations in (4095, 16385):
        with pytest.raises(ValueError, match="iterations"):
            derive_credential("SCRAM-SHA-256", "pw", b"salt", iterations)
