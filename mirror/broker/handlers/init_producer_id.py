"""InitProducerId (key 22), v0-4: producer ids for idempotent and transactional producers (KIP-98).

Without a transactional id: a new producer id at epoch 0, never reused, even across
restarts; from v3 a producer may pass its id and epoch to have the epoch bumped instead.

With one, the transaction coordinator answers (:meth:`TransactionCoordinator.init_producer_id`):
epoch 0 of a new producer id the first time; later a bumped epoch, which fences every
older instance of the producer, after aborting a transaction it left ongoing; a new
producer id once the epochs run out. ``transaction_timeout_ms`` must be in
1..``transaction.max.timeout.ms`` (INVALID_TRANSACTION_TIMEOUT). From v3 the request may
carry the producer's current id and epoch (both or neither, else INVALID_REQUEST), which
Kafka checks before bumping (KIP-360). PRODUCER_FENCED exists from v4; v0-3 get
INVALID_PRODUCER_EPOCH instead.
"""

from __future__ import annotations

import logging

from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from ..errors import ApiError, kerr
from ._api import Api
from ._txn_errors import error_code

API = Api(key=22, min_version=0, max_version=4, request=InitProducerIdRequest)

log = logging.getLogger(__name__)
_MAX_EPOCH = (1 << 15) - 1
_NONE = -1


async def handle(request, version: int, state) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return _transactional(request, version, state)
    if version >= 3 and request.producer_id >= 0 and 0 <= request.producer_epoch < _MAX_EPOCH - 1:
        producer_id, epoch = request.producer_id, request.producer_epoch + 1
    else:
        producer_id, epoch = state.producer_ids.allocate(), 0
    return _response(version, 0, producer_id, epoch)


def _transactional(request, version: int, state) -> InitProducerIdResponse:
    try:
        expected = None
        if version >= 3 and (request.producer_id, request.producer_epoch) != (_NONE, _NONE):
            if _NONE in (request.producer_id, request.producer_epoch):
                raise ApiError(kerr.InvalidRequestError, "producer id and epoch must both be given or both be -1")
            expected = (request.producer_id, request.producer_epoch)
        producer_id, epoch = state.transactions.init_producer_id(request.transactional_id,
                                                                 request.transaction_timeout_ms, expected)
    except ApiError as exc:
        log.info("InitProducerId for %r refused: %s", request.transactional_id, exc)
        return _response(version, error_code(exc, producer_fenced_known=version >= 4), _NONE, _NONE)
    return _response(version, 0, producer_id, epoch)


def _response(version: int, error: int, producer_id: int, epoch: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(version=version, throttle_time_ms=0, error_code=error,
                                  producer_id=producer_id, producer_epoch=epoch)
