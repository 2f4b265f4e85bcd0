"""How the client proves who it is and checks whom it talks to: Kafka's ``security.protocol``.

:class:`Security` holds the TLS files and the SASL credentials of one cluster; the protocol
follows from which are set (``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``), so
the two can never disagree. TLS wraps each socket before the first request
(:class:`~.connection.KafkaConnection`); SASL runs after ApiVersions (:mod:`.sasl`).

Passwords are :class:`pydantic.SecretStr`: their ``repr`` and ``str`` are masked, so a
settings object can be logged or put in an error without leaking one.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import SecretStr

from kcodecs import KMirrorError

__all__ = ["Security", "TlsSettings", "SaslCredentials", "SaslMechanism", "AuthenticationError", "client_context", "tls_failure",
           "PLAINTEXT"]

SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


class AuthenticationError(KMirrorError):
    """The broker refused our credentials or certificate, or we refused the broker's
    certificate (Kafka's ``AuthenticationException``). Permanent: retrying cannot help."""

    def __init__(self, address: str, reason: str):
        super().__init__(f"{address}: authentication failed: {reason}")
        self.address = address
        self.reason = reason


@dataclass(frozen=True)
class TlsSettings:
    """Kafka's ``ssl.*`` client settings as PEM files."""

    ca_file: Path | None = None
    """CA certificates that sign the brokers' certificates (``ssl.ca.location``); None: the system's."""
    cert_file: Path | None = None
    """Our certificate, for brokers that require one (mTLS, ``ssl.certificate.location``)."""
    key_file: Path | None = None
    """Its private key, if not in ``cert_file`` (``ssl.key.location``)."""
    key_password: SecretStr | None = None
    check_hostname: bool = True
    """Whether the broker's certificate must name the host we connect to
    (``ssl.endpoint.identification.algorithm=https``, Kafka's default since 2.0)."""


@dataclass(frozen=True)
class SaslCredentials:
    mechanism: SaslMechanism
    username: str
    password: SecretStr


@dataclass(frozen=True)
class Security:
    tls: TlsSettings | None = None
    sasl: SaslCredentials | None = None

    @property
    def protocol(self) -> str:
        return ("SASL_" if self.sasl else "") + ("SSL" if self.tls else "PLAINTEXT")


PLAINTEXT = Security()


def client_context(tls: TlsSettings) -> ssl.SSLContext:
    """An SSL context that verifies brokers against ``ca_file`` and presents our certificate if
    one is given. Unreadable or invalid files raise :class:`AuthenticationError` at once."""
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=tls.ca_file)
        if tls.cert_file is not None:
            password = tls.key_password.get_secret_value() if tls.key_password is not None else None
            context.load_cert_chain(tls.cert_file, tls.key_file, password=password)
    except (OSError, ssl.SSLError) as exc:
        raise AuthenticationError("TLS settings", f"cannot load the CA, certificate or key file: {exc}") from exc
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = tls.check_hostname
    return context


def tls_failure(address: str, exc: OSError, *, handshake: bool = False) -> KMirrorError | None:
    """The error for a TLS failure, or None for one that is only a broken connection.

    A certificate we refused, an alert from the broker (it refused our certificate, or has
    none for us), and a handshake the broker walked out of (a plaintext port closes on the
    ClientHello) are configuration problems, not outages: :class:`AuthenticationError`, as
    Kafka's clients raise ``SslAuthenticationException`` for any failed handshake. The caller
    says which failures can still be part of the handshake: under TLS 1.3 the broker checks
    our certificate after our handshake is over, and its alert comes at our first read.
    A connection that closes without an alert after the handshake is a broken connection."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return AuthenticationError(address, f"the broker's certificate was refused: {exc.verify_message}")
    if not isinstance(exc, ssl.SSLError) or (not handshake and isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError))):
        return None
    reason = exc.reason or str(exc)
    if reason in _OUR_CERTIFICATE_REFUSED:
        hint = " (the broker refused our certificate)"
    elif handshake and (reason in _NOT_TLS or isinstance(exc, ssl.SSLEOFError)):
        hint = " (is it a TLS listener?)"
    else:
        hint = ""
    return AuthenticationError(address, f"TLS {'handshake ' if handshake else ''}failed: {reason}{hint}")


_NOT_TLS = {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST", "UNKNOWN_PROTOCOL"}
_OUR_CERTIFICATE_REFUSED = {
    # Kafka 4's (Java's) brokers, under TLS 1.2 and 1.3 alike:
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN",  # signed by a CA they do not trust
    "SSLV3_ALERT_BAD_CERTIFICATE",  # none sent
    # OpenSSL's (the embedded broker's):
    "TLSV1_ALERT_UNKNOWN_CA",  # signed by a CA it does not trust
    "TLSV13_ALERT_CERTIFICATE_REQUIRED",  # none sent, TLS 1.3 (under 1.2: HANDSHAKE_FAILURE, which says less)
    # The other alerts RFC 8446 section 6.2 gives for a certificate refused:
    "SSLV3_ALERT_CERTIFICATE_EXPIRED",
    "SSLV3_ALERT_CERTIFICATE_REVOKED",
    "SSLV3_ALERT_UNSUPPORTED_CERTIFICATE",
}
"""OpenSSL's reasons for the alerts by which a broker refuses the certificate we presented, or
the lack of one; the first four as Kafka 4.4 and the embedded broker send them."""
