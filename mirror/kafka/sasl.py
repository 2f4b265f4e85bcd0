"""The client side of SASL authentication, as Kafka's clients do it since KIP-152.

After ApiVersions, SaslHandshake v1 names the mechanism (the broker answers with the ones it
enables), then each token of the mechanism travels in a SaslAuthenticate request and its
answer. PLAIN sends one token, ``NUL user NUL password`` (RFC 4616). SCRAM-SHA-256/512 (RFC
5802, 7677) is ``scramp``'s client: client-first, server-first, client-final, server-final,
whose server signature proves the broker knew our credentials too.

A refusal (SASL_AUTHENTICATION_FAILED, an unsupported mechanism, a broker without
SaslAuthenticate, a server signature that does not verify) raises
:class:`~.security.AuthenticationError` with the broker's message, never the password.
"""

from __future__ import annotations

from typing import Callable

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from scramp import ScramClient, ScramException

from .security import AuthenticationError, SaslCredentials

__all__ = ["authenticate", "HANDSHAKE_VERSION", "AUTHENTICATE_VERSIONS"]

HANDSHAKE_VERSION = 1
"""v1 announces that SaslAuthenticate carries the tokens; v0 sent them as bare frames."""
AUTHENTICATE_VERSIONS = (0, SaslAuthenticateRequest.max_version)

Send = Callable[[bytes], bytes]


def authenticate(conn, versions: dict[int, tuple[int, int]], credentials: SaslCredentials) -> None:
    """Authenticate ``conn`` (a :class:`~.connection.KafkaConnection` whose ApiVersions
    answer was ``versions``) with ``credentials``."""
    address = conn.address
    version = _authenticate_version(address, versions)
    handshake = conn.call(SaslHandshakeRequest(mechanism=credentials.mechanism), HANDSHAKE_VERSION)
    if handshake.error_code:
        raise AuthenticationError(address, f"the broker does not enable SASL mechanism {credentials.mechanism} "
                                           f"(it enables: {', '.join(handshake.mechanisms) or 'none'})")

    def send(token: bytes) -> bytes:
        response = conn.call(SaslAuthenticateRequest(auth_bytes=token), version)
        if response.error_code:
            raise AuthenticationError(address, f"{credentials.mechanism} as {credentials.username!r}: "
                                               f"{response.error_message or f'error code {response.error_code}'}")
        return bytes(response.auth_bytes)

    if credentials.mechanism == "PLAIN":
        password = credentials.password.get_secret_value()
        send(b"\0" + credentials.username.encode() + b"\0" + password.encode())
    else:
        _scram(address, credentials, send)


def _scram(address: str, credentials: SaslCredentials, send: Send) -> None:
    client = ScramClient([credentials.mechanism], credentials.username, credentials.password.get_secret_value())
    try:
        client.set_server_first(send(client.get_client_first().encode()).decode())
        client.set_server_final(send(client.get_client_final().encode()).decode())
    except (ScramException, UnicodeDecodeError) as exc:
        raise AuthenticationError(address, f"{credentials.mechanism} exchange failed: {exc}") from exc


def _authenticate_version(address: str, versions: dict[int, tuple[int, int]]) -> int:
    handshake_low, handshake_high = versions.get(SaslHandshakeRequest.API_KEY, (0, -1))
    low, high = versions.get(SaslAuthenticateRequest.API_KEY, (0, -1))
    version = min(high, AUTHENTICATE_VERSIONS[1])
    if not handshake_low <= HANDSHAKE_VERSION <= handshake_high or version < max(low, AUTHENTICATE_VERSIONS[0]):
        raise AuthenticationError(address, "the broker does not speak SaslHandshake v1 and SaslAuthenticate "
                                           "(KIP-152, Kafka 1.0+)")
    return version
