"""Error codes of the transaction APIs as each request version understands them."""

from __future__ import annotations

import logging
from typing import Callable

from ..errors import ApiError, kerr

log = logging.getLogger(__name__)


def error_code(exc: ApiError, *, producer_fenced_known: bool) -> int:
    """PRODUCER_FENCED (KIP-588) for versions that know it, INVALID_PRODUCER_EPOCH before them,
    as Kafka's ``KafkaApis`` answers older clients, which treat both as fatal fencing."""
    if exc.error is kerr.ProducerFencedError and not producer_fenced_known:
        return kerr.InvalidProducerEpochError.errno
    return exc.code


def coordinator_code(call: Callable[[], object], *, producer_fenced_known: bool, request: str) -> int:
    """Run a transaction coordinator call whose whole answer is one error code: 0, or the
    refusal's code as :func:`error_code` gives it, logged (the client sees only the number)."""
    try:
        call()
    except ApiError as exc:
        log.info("%s refused: %s", request, exc)
        return error_code(exc, producer_fenced_known=producer_fenced_known)
    return 0
