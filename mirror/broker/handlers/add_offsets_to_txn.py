"""AddOffsetsToTxn (key 25), v0-3: always COORDINATOR_NOT_AVAILABLE, until consumer groups exist.

In Kafka this adds the group's ``__consumer_offsets`` partition to the transaction, so that
TxnOffsetCommit can commit consumer offsets atomically with the produced data
(``sendOffsetsToTransaction``). The embedded broker has no group coordinator and no offsets
topic, so it answers as FindCoordinator does for groups: the coordinator is not available.
Clients treat that as retriable and keep trying until their own timeout; the transaction
itself is untouched and can still be committed or aborted.
"""

from __future__ import annotations

import logging

from kafka.protocol.producer import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

from ..errors import kerr

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 3
REQUEST = AddOffsetsToTxnRequest

log = logging.getLogger(__name__)


async def handle(request, version: int, state) -> AddOffsetsToTxnResponse:
    log.info("AddOffsetsToTxn for %r, group %r: no group coordinator (consumer groups are not supported)",
             request.transactional_id, request.group_id)
    return AddOffsetsToTxnResponse(version=version, throttle_time_ms=0,
                                   error_code=kerr.CoordinatorNotAvailableError.errno)
