"""SaslHandshake (key 17), v1 only: the client names its SASL mechanism; the answer lists the enabled ones.

v0 is left out: after it the SASL tokens travel as bare frames without Kafka headers, which
no client uses since SaslAuthenticate (KIP-152, Kafka 1.0); librdkafka and kafka-python send
v1 when the broker offers it. The state machine is :mod:`mirror.broker.security.session`.
"""

from __future__ import annotations

from kafka.protocol.sasl import SaslHandshakeRequest, SaslHandshakeResponse

from ..security import current_session
from ._api import Api

API = Api(key=17, min_version=1, max_version=1, request=SaslHandshakeRequest)


async def handle(request, version: int, state) -> SaslHandshakeResponse:
    session = current_session.get()
    code = session.handshake(request.mechanism)
    return SaslHandshakeResponse(version=version, error_code=code, mechanisms=session.enabled)
