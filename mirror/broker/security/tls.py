"""The listener's TLS context: Kafka's ``ssl.*`` broker settings as an :class:`ssl.SSLContext`."""

from __future__ import annotations

import ssl

from .settings import ListenerTls, SecuritySettingsError

__all__ = ["server_context"]


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
