"""SaslAuthenticate (key 36), v0-2: one token of the SASL exchange each way (KIP-152).

v1 adds ``session_lifetime_ms``, always 0 here (no re-authentication, KIP-368); v2 is the
flexible version. A failure answers SASL_AUTHENTICATION_FAILED and the server then closes the
connection. The exchange itself is :mod:`mirror.broker.security`.
"""

from __future__ import annotations

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse

from ..security import current_session
from ._api import Api

API = Api(key=36, min_version=0, max_version=2, request=SaslAuthenticateRequest)


async def handle(request, version: int, state) -> SaslAuthenticateResponse:
    outcome = current_session.get().authenticate(request.auth_bytes)
    return SaslAuthenticateResponse(version=version, error_code=outcome.error_code, error_message=outcome.error_message,
                                    auth_bytes=outcome.token, session_lifetime_ms=0)
