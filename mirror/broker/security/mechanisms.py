"""The server side of each SASL mechanism, one exchange per connection.

An exchange takes the client's tokens one at a time (the ``auth_bytes`` of successive
SaslAuthenticate requests, KIP-152) and answers each, until it reports the user it
authenticated or raises :class:`AuthenticationFailed`.

- PLAIN (RFC 4616, Kafka's ``PlainSaslServer``): one token ``authzid NUL user NUL password``;
  an authorization id other than the user is refused, as Kafka does.
- SCRAM-SHA-256/512 (RFC 5802, RFC 7677, Kafka's ``ScramSaslServer``): client-first,
  server-first, client-final, server-final, by ``scramp``. Salted credentials are derived once
  when the broker starts (4096 iterations, Kafka's minimum), as Kafka stores them, so no
  password is kept in the exchange.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Protocol

from scramp import ScramException, ScramMechanism

from kcodecs import KMirrorError

from .settings import ListenerSecurity

__all__ = ["AuthenticationFailed", "Credentials", "Exchange", "Step"]

_SCRAM_ITERATIONS = 4096


class AuthenticationFailed(KMirrorError):
    """The client's credentials were wrong; ``reason`` is for the broker's log only (the
    client is told only that authentication failed, as Kafka tells it)."""

    def __init__(self, reason: str, user: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.user = user


@dataclass(frozen=True)
class Step:
    """The broker's answer to one client token; ``user`` is set once the client is authenticated."""

    token: bytes
    user: str | None = None


class Exchange(Protocol):
    def step(self, token: bytes) -> Step: ...


class Credentials:
    """The listener's users: PLAIN passwords, and SCRAM's salted keys per mechanism."""

    def __init__(self, security: ListenerSecurity):
        self.mechanisms = security.sasl_mechanisms
        self._passwords = {user.name: user.password.encode() for user in security.users}
        self._scram = {(mechanism, user.name): ScramMechanism(mechanism).make_auth_info(user.password, _SCRAM_ITERATIONS)
                       for mechanism in self.mechanisms if mechanism.startswith("SCRAM-")
                       for user in security.users}

    def exchange(self, mechanism: str) -> Exchange:
        """A new exchange for an enabled ``mechanism``."""
        return _Plain(self) if mechanism == "PLAIN" else _Scram(self, mechanism)

    def check_password(self, user: str, password: bytes) -> bool:
        expected = self._passwords.get(user)
        return expected is not None and hmac.compare_digest(expected, password)

    def scram_keys(self, mechanism: str, user: str) -> tuple:
        try:
            return self._scram[(mechanism, user)]
        except KeyError:
            raise AuthenticationFailed(f"unknown user {user!r}", user) from None


class _Plain:
    def __init__(self, credentials: Credentials):
        self._credentials = credentials

    def step(self, token: bytes) -> Step:
        parts = bytes(token).split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("malformed PLAIN token (expected authzid NUL user NUL password)")
        authzid, user_bytes, password = parts
        user = user_bytes.decode(errors="replace")
        if authzid and authzid != user_bytes:
            raise AuthenticationFailed(f"authorization id {authzid.decode(errors='replace')!r} is not the user", user)
        if not self._credentials.check_password(user, password):
            raise AuthenticationFailed(f"wrong password or unknown user {user!r}", user)
        return Step(b"", user)


class _Scram:
    def __init__(self, credentials: Credentials, mechanism: str):
        self._user: str | None = None

        def keys(user: str) -> tuple:
            self._user = user
            return credentials.scram_keys(mechanism, user)

        self._server = ScramMechanism(mechanism).make_server(keys)
        self._first = True

    def step(self, token: bytes) -> Step:
        try:
            message = bytes(token).decode()
            if self._first:
                self._first = False
                self._server.set_client_first(message)
                return Step(self._server.get_server_first().encode())
            self._server.set_client_final(message)
            return Step(self._server.get_server_final().encode(), self._user)
        except (ScramException, UnicodeDecodeError) as exc:
            reason = "wrong password" if "proof" in str(exc).lower() else str(exc)
            raise AuthenticationFailed(f"{reason} (user {self._user!r})", self._user) from exc
