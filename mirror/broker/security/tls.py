"""The listener's TLS: Kafka's ``ssl.*`` broker settings as an :class:`ssl.SSLContext`, and the
handshake of each connection, which ends with OpenSSL's alert when it fails.

Why the alert matters: a client whose certificate the listener refuses
(``ssl.client.auth=required``) must learn that it was refused, as from Kafka, whose
``SslTransportLayer.handshakeFailure`` flushes the alert its SSLEngine wrote before it
closes. Without it the client sees the connection closed: during its handshake under TLS
1.2, or at its first read under TLS 1.3, where the client's handshake is over before the
server checks the certificate. Clients take that for a broken connection and retry it as an
outage; with the alert (``unknown ca``, ``certificate required``) librdkafka's error names it
and kmirror's client raises ``AuthenticationError``.

Why :class:`AlertingTlsProtocol`: when ``do_handshake`` fails, OpenSSL leaves the alert in
the outgoing memory BIO, and asyncio's ``SSLProtocol`` force-closes the transport without
sending it (CPython gh-98078; fixed by python/cpython#153620, which sends it first, as
blocking ``ssl.SSLSocket``\\s always did). The subclass makes that one call,
``_process_outgoing``, itself; where CPython already made it, the BIO is empty and nothing
more is sent. Python 3.10's ``SSLProtocol`` is an older design without that method; there
the handshake still fails without an alert.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from asyncio import sslproto

from .settings import ListenerTls, SecuritySettingsError

__all__ = ["server_context", "AlertingTlsProtocol"]

log = logging.getLogger(__name__)


def server_context(tls: ListenerTls) -> ssl.SSLContext:
    """TLS 1.2 or later (Kafka's default ``ssl.enabled.protocols``); with a client CA, a client
    without a certificate it signed fails the handshake (``ssl.client.auth=required``)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
        if tls.client_ca_file is not None:
            context.load_verify_locations(cafile=tls.client_ca_file)
            context.verify_mode = ssl.CERT_REQUIRED
    except (OSError, ssl.SSLError) as exc:
        raise SecuritySettingsError(f"cannot load the listener's TLS files: {exc}") from exc
    return context


class AlertingTlsProtocol(sslproto.SSLProtocol):
    """The server side of one TLS connection in front of ``app_protocol``, which is told of
    the connection only once the handshake succeeds. A failed handshake is logged with
    OpenSSL's reason (``CERTIFICATE_VERIFY_FAILED``, ``WRONG_VERSION_NUMBER`` for a plaintext
    client), its alert sent, and the connection closed."""

    def __init__(self, app_protocol: asyncio.BaseProtocol, context: ssl.SSLContext):
        super().__init__(asyncio.get_running_loop(), app_protocol, context, None, server_side=True)
        self.handshaking = True
        self._raw: asyncio.BaseTransport | None = None
        self._peer = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._raw = transport
        self._peer = transport.get_extra_info("peername")
        super().connection_made(transport)

    def abort_handshake(self) -> None:
        """Close the connection if its handshake is still under way (the broker is stopping)."""
        if self.handshaking and self._raw is not None:
            self._raw.close()

    def _on_handshake_complete(self, handshake_exc) -> None:
        self.handshaking = False
        if isinstance(handshake_exc, ssl.SSLError):  # not a client that hung up (ConnectionResetError)
            log.warning("closing connection from %s: TLS failed: %s", self._peer, handshake_exc.reason or handshake_exc)
            send_alert = getattr(self, "_process_outgoing", None)  # absent from Python 3.10's SSLProtocol
            if send_alert is not None:
                send_alert()
        super()._on_handshake_complete(handshake_exc)
