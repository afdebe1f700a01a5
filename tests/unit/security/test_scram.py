"""SCRAM math and the server exchange: the RFC 7677 worked example, Kafka's stored form, and every way a client
message can be wrong."""

from __future__ import annotations

import base64
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcoord.errors import ConfigError, ErrorCode
from zkcoord.security.scram import (
    MAX_EXTENSIONS,
    MAX_MESSAGE_BYTES,
    MAX_NONCE_CHARS,
    MAX_USERNAME_BYTES,
    ScramCredential,
    ScramError,
    ScramServer,
    ScramState,
    client_proof,
    parse_client_first,
)

# RFC 7677 §3: user "user", password "pencil".
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_server() -> ScramServer:
    server = ScramServer("SCRAM-SHA-256")
    first = server.client_first(CLIENT_FIRST)
    assert first.username == "user"
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pencil", SALT, 4096)
    assert server.server_first(cred, SERVER_NONCE) == SERVER_FIRST
    return server


def test_rfc7677_example_exchange() -> None:
    server = rfc_server()
    assert server.client_final(CLIENT_FINAL) == SERVER_FINAL
    assert server.state is ScramState.COMPLETE


def test_nonce_with_a_prefix_is_accepted_as_kafka_does() -> None:
    """librdkafka 2.0 sends `r=<client nonce><combined nonce>`; Kafka checks endsWith, the proof covers it."""
    server = ScramServer("SCRAM-SHA-256")
    server.client_first(b"n,,n=u,r=abc")
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw", b"0123456789", 4096)
    server_first = server.server_first(cred, "XYZ")
    without_proof = "c=biws,r=abcabcXYZ"
    auth = f"n=u,r=abc,{server_first.decode()},{without_proof}".encode()
    proof = base64.b64encode(client_proof("SCRAM-SHA-256", "pw", b"0123456789", 4096, auth)).decode()
    assert server.client_final(f"{without_proof},p={proof}".encode()).startswith(b"v=")


def test_wrong_proof_fails_with_kafka_code() -> None:
    server = rfc_server()
    bad = CLIENT_FINAL[:-6] + b"AAAAA="
    with pytest.raises(ScramError, match="invalid credentials") as info:
        server.client_final(bad)
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED == 58
    assert server.state is ScramState.FAILED


def test_unknown_user_looks_like_a_wrong_password() -> None:
    server = ScramServer("SCRAM-SHA-256")
    server.client_first(CLIENT_FIRST)
    first = server.server_first(None, SERVER_NONCE)
    assert first.startswith(b"r=rOprNGfwEbeRWgbNEkqO" + SERVER_NONCE.encode() + b",s=")
    with pytest.raises(ScramError, match="invalid credentials"):
        server.client_final(CLIENT_FINAL)


@pytest.mark.parametrize(
    ("final", "reason"),
    [
        (CLIENT_FINAL.replace(b"c=biws", b"c=eSws"), "channel binding"),
        (CLIENT_FINAL.replace(b"$k0,", b"$k1,"), "nonce"),
        (CLIENT_FINAL.replace(b"r=rOpr", b"r=Opr"), "nonce"),
        (CLIENT_FINAL.split(b",p=")[0], "no proof"),
        (CLIENT_FINAL[:-4] + b"!!!!", "not base64"),
    ],
)
def test_malformed_client_final(final: bytes, reason: str) -> None:
    with pytest.raises(ScramError, match=reason):
        rfc_server().client_final(final)


@pytest.mark.parametrize(
    "first",
    [b"n,,r=abc", b"p=tls,,n=u,r=abc", b"n,a=other,n=u,r=abc", b"n,,n=a=3x,r=abc", b"n,,n=u,r=", b"\xff"],
)
def test_malformed_client_first(first: bytes) -> None:
    with pytest.raises(ScramError):
        ScramServer("SCRAM-SHA-512").client_first(first)


def test_messages_out_of_turn() -> None:
    server = ScramServer("SCRAM-SHA-256")
    with pytest.raises(ScramError, match="out of turn"):
        server.client_final(CLIENT_FINAL)


def test_escaped_user_name() -> None:
    assert ScramServer("SCRAM-SHA-256").client_first(b"n,,n=a=2Cb=3Dc,r=xyz").username == "a,b=c"


def test_kafka_stored_form_round_trip_and_errors() -> None:
    cred = ScramCredential.from_password("SCRAM-SHA-512", "secret", b"0123456789abcdef", 8192)
    text = cred.to_kafka()
    assert text.startswith("salt=MDEyMzQ1Njc4OWFiY2RlZg==,stored_key=") and text.endswith(",iterations=8192")
    assert ScramCredential.from_kafka(text) == cred
    for bad in (
        "salt=AA==",
        text.replace("iterations=8192", "iterations=10"),
        "salt=!,stored_key=A,server_key=A,iterations=4096",
    ):
        with pytest.raises(ConfigError):
            ScramCredential.from_kafka(bad)
    with pytest.raises(ConfigError, match="4096"):
        ScramCredential.from_password("SCRAM-SHA-256", "x", b"s", 100)


@settings(max_examples=25, deadline=None)
@given(
    mechanism=st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"]),
    password=st.text(min_size=1, max_size=20),
    wrong=st.text(min_size=1, max_size=20),
    salt=st.binary(min_size=8, max_size=24),
    nonce=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789+/", min_size=8, max_size=24),
)
def test_generated_exchanges_accept_only_the_right_password(
    mechanism: str, password: str, wrong: str, salt: bytes, nonce: str
) -> None:
    cred = ScramCredential.from_password(mechanism, password, salt, 4096)
    for attempt in (password, wrong):
        server = ScramServer(mechanism)
        server.client_first(b"n,,n=u,r=" + nonce.encode())
        server_first = server.server_first(cred, "srv" + nonce)
        without_proof = f"c=biws,r={nonce}srv{nonce}"
        auth = f"n=u,r={nonce},{server_first.decode()},{without_proof}".encode()
        proof = base64.b64encode(client_proof(mechanism, attempt, salt, 4096, auth)).decode()
        final = f"{without_proof},p={proof}".encode()
        if attempt == password:
            assert server.client_final(final).startswith(b"v=")
        else:
            with pytest.raises(ScramError):
                server.client_final(final)


# -- bounds on what an unauthenticated client sends ------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "reason"),
    [
        (b"n,,n=u,r=" + b"x" * MAX_MESSAGE_BYTES, f"message of {MAX_MESSAGE_BYTES + 9} bytes, at most 8192"),
        (b"n,,n=" + b"u" * (MAX_USERNAME_BYTES + 1) + b",r=abc", "user name longer than 1024 bytes"),
        (b"n,,n=u,r=" + b"x" * (MAX_NONCE_CHARS + 1), "nonce of 1025 characters, at most 1024"),
        (b"n,,n=u,r=abc" + b",e=1" * (MAX_EXTENSIONS + 1), "19 attributes, at most 18"),
        (b"n,,n=u,r=ab\x7fc", "nonce is empty or not printable ASCII"),
        (b"n,,n=u,r=ab c", "nonce is empty or not printable ASCII"),
        ("n,,n=u,r=abé".encode(), "nonce is empty or not printable ASCII"),
        (b"n,,n=,r=abc", "empty user name"),
    ],
)
def test_oversized_or_invalid_client_first_fields_are_named(first: bytes, reason: str) -> None:
    with pytest.raises(ScramError, match=reason) as info:
        ScramServer("SCRAM-SHA-256").client_first(first)
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_bounds_admit_the_largest_valid_fields() -> None:
    extensions = b",e=v" * MAX_EXTENSIONS
    first = b"n,,n=" + b"u" * MAX_USERNAME_BYTES + b",r=" + b"~" * MAX_NONCE_CHARS + extensions
    got = parse_client_first(first)
    assert len(got.username) == MAX_USERNAME_BYTES and len(got.extensions) == MAX_EXTENSIONS


def test_oversized_client_final_is_refused_by_length() -> None:
    with pytest.raises(ScramError, match="client-final: message of 8193 bytes"):
        rfc_server().client_final(b"c=biws,r=" + b"x" * (MAX_MESSAGE_BYTES - 9 - 3) + b",p=A")
    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    long_r = "x" * (2 * MAX_NONCE_CHARS + 1) + nonce
    with pytest.raises(ScramError, match="client-final: nonce longer"):
        rfc_server().client_final(f"c=biws,r={long_r},p=AAAA".encode())
    with pytest.raises(ScramError, match="client-final: 19 attributes"):
        rfc_server().client_final(b"c=biws,r=" + nonce.encode() + b",e=1" * 17 + b",p=AAAA")


def test_a_huge_client_message_costs_no_memory_or_per_character_work() -> None:
    # Before: a 50 MB nonce was decoded and checked character by character (~3 s of the event loop, 50+ MB).
    # Whatever the frame bound, the parser refuses it on its length: nothing the size of the input is allocated.
    huge = b"n,,n=u,r=" + b"x" * (50 * 1024 * 1024)
    huge_final = b"c=biws,r=" + huge + b",p=AAAA"
    tracemalloc.start()
    try:
        with pytest.raises(ScramError, match="at most 8192"):
            ScramServer("SCRAM-SHA-256").client_first(huge)
        with pytest.raises(ScramError, match="at most 8192"):
            rfc_server().client_final(huge_final)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, peak


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=MAX_MESSAGE_BYTES + 64),
        st.lists(
            st.sampled_from(
                [b"n", b",", b"=", b"a", b"r", b"n=", b"r=", b"=2C", b"=3D", b"p=", b"y", b"\xff"]
            ),
            max_size=200,
        ).map(b"".join),
    )
)
def test_any_client_first_bytes_parse_or_raise_scram_error(data: bytes) -> None:
    try:
        got = parse_client_first(data)
    except ScramError:
        return
    assert got.username and got.nonce and len(data) <= MAX_MESSAGE_BYTES


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=MAX_MESSAGE_BYTES + 64)
    | st.text(max_size=300).map(lambda t: b"c=biws,r=" + t.encode())
)
def test_any_client_final_bytes_answer_or_raise_scram_error(data: bytes) -> None:
    server = rfc_server()
    with pytest.raises(ScramError):
        server.client_final(data)  # no proof but the RFC's is right, and random bytes are not it
    assert server.state is ScramState.FAILED
