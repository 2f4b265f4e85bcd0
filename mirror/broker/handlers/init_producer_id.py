"""InitProducerId (key 22), v0-4: producer ids for idempotent producers (KIP-98).

Ids are never reused, even across restarts. A transactional id is refused: the embedded
broker has no transaction coordinator. From v3 a producer may pass its id and epoch to bump
the epoch.
"""

from __future__ import annotations

import logging

from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from ..errors import kerr

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 4
REQUEST = InitProducerIdRequest

log = logging.getLogger(__name__)
_MAX_EPOCH = (1 << 15) - 1


async def handle(request, version: int, state) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        log.warning("refusing transactional id %r: no transaction coordinator", request.transactional_id)
        return InitProducerIdResponse(version=version, throttle_time_ms=0,
                                      error_code=kerr.TransactionalIdAuthorizationFailedError.errno,
                                      producer_id=-1, producer_epoch=-1)
    if version >= 3 and request.producer_id >= 0 and 0 <= request.producer_epoch < _MAX_EPOCH - 1:
        producer_id, epoch = request.producer_id, request.producer_epoch + 1
    else:
        producer_id, epoch = state.producer_ids.allocate(), 0
    return InitProducerIdResponse(version=version, throttle_time_ms=0, error_code=0,
                                  producer_id=producer_id, producer_epoch=epoch)
