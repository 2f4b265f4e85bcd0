"""Listener security of the embedded broker: TLS (optionally mutual) and SASL authentication.

Kafka's listener security protocols (``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``,
``SASL_SSL``) follow from :class:`ListenerSecurity`: TLS when it has a certificate, SASL when
it enables mechanisms. The handlers of SaslHandshake and SaslAuthenticate only decode and
encode; the exchange lives here (:mod:`.session`, :mod:`.mechanisms`), as Kafka keeps it in
``SaslServerAuthenticator`` rather than in ``KafkaApis``. There is no authorization: an
authenticated client may do anything.
"""

from .mechanisms import Credentials
from .session import PRE_AUTHENTICATION_APIS, Session, current_session
from .settings import MECHANISMS, ListenerSecurity, ListenerTls, SaslUser, SecuritySettingsError
from .tls import AlertingTlsProtocol, server_context

__all__ = ["ListenerSecurity", "ListenerTls", "SaslUser", "MECHANISMS", "Credentials", "Session", "current_session",
           "PRE_AUTHENTICATION_APIS", "server_context", "AlertingTlsProtocol", "SecuritySettingsError"]
