"""Error codes of the transaction APIs as each request version understands them."""

from __future__ import annotations

from ..errors import ApiError, kerr


def error_code(exc: ApiError, *, producer_fenced_known: bool) -> int:
    """PRODUCER_FENCED (KIP-588) for versions that know it, INVALID_PRODUCER_EPOCH before them,
    as Kafka's ``KafkaApis`` answers older clients, which treat both as fatal fencing."""
    if exc.error is kerr.ProducerFencedError and not producer_fenced_known:
        return kerr.InvalidProducerEpochError.errno
    return exc.code
