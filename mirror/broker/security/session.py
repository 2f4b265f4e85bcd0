"""One connection's SASL state, as Kafka's ``SaslServerAuthenticator`` keeps it.

Until the client is authenticated only ApiVersions, SaslHandshake and SaslAuthenticate are
served; anything else closes the connection (Kafka: "Unexpected Kafka request ... during
SASL handshake"). SaslHandshake (v1, KIP-152) picks the mechanism; SaslAuthenticate carries
its tokens. A refused mechanism or failed authentication is answered with Kafka's error
code and then the connection is closed, as Kafka does; the reason is logged here, with the
client's address, and never sent to the client. On a listener without SASL, or once
authenticated, SaslHandshake and SaslAuthenticate get ILLEGAL_SASL_STATE (no
re-authentication, KIP-368).
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from dataclasses import dataclass

import kafka.errors as kerr

from .mechanisms import AuthenticationFailed, Credentials, Exchange

__all__ = ["Session", "current_session", "PRE_AUTHENTICATION_APIS", "Outcome"]

log = logging.getLogger(__name__)

PRE_AUTHENTICATION_APIS = frozenset({18, 17, 36})
"""ApiVersions, SaslHandshake, SaslAuthenticate: all a client may send before it is authenticated."""


@dataclass(frozen=True)
class Outcome:
    """What SaslAuthenticate answers: an error code and message for the client, and the token."""

    error_code: int = 0
    error_message: str | None = None
    token: bytes = b""


class Session:
    """Authentication of one connection; ``credentials`` None is a listener without SASL."""

    def __init__(self, credentials: Credentials | None, peer: str):
        self._credentials = credentials
        self._peer = peer
        self._exchange: Exchange | None = None
        self._mechanism = ""
        self.authenticated = credentials is None
        self.failed = False
        """Set once the client is refused: the server closes the connection after the answer."""

    def permits(self, api_key: int) -> bool:
        return self.authenticated or api_key in PRE_AUTHENTICATION_APIS

    @property
    def enabled(self) -> list[str]:
        return list(self._credentials.mechanisms) if self._credentials is not None else []

    def handshake(self, mechanism: str) -> int:
        """Start an exchange with ``mechanism``; the error code for SaslHandshake."""
        if self._credentials is None or self.authenticated or self._exchange is not None:
            return kerr.IllegalSaslStateError.errno
        if mechanism not in self._credentials.mechanisms:
            self.failed = True
            log.warning("refusing %s: SASL mechanism %r is not enabled (enabled: %s)", self._peer, mechanism,
                        ", ".join(self.enabled))
            return kerr.UnsupportedSaslMechanismError.errno
        self._mechanism = mechanism
        self._exchange = self._credentials.exchange(mechanism)
        return 0

    def authenticate(self, token: bytes) -> Outcome:
        """One SaslAuthenticate round."""
        if self.authenticated:
            return Outcome(kerr.IllegalSaslStateError.errno, "already authenticated")
        if self._exchange is None:
            self.failed = True
            return Outcome(kerr.IllegalSaslStateError.errno, "SaslAuthenticate before SaslHandshake")
        try:
            step = self._exchange.step(token)
        except AuthenticationFailed as exc:
            self.failed = True
            log.warning("authentication of %s with %s failed: %s", self._peer, self._mechanism, exc.reason)
            return Outcome(kerr.SaslAuthenticationFailedError.errno,
                           f"Authentication failed during authentication due to invalid credentials with SASL "
                           f"mechanism {self._mechanism}")
        if step.user is not None:
            self.authenticated = True
            log.debug("%s authenticated as %r with %s", self._peer, step.user, self._mechanism)
        return Outcome(token=step.token)


current_session: ContextVar[Session] = ContextVar("current_session")
"""The session of the connection whose request is being handled; the server sets it for
each connection (its own task), the SASL handlers read it."""
