"""Fetch (key 1), v4-12: raw stored bytes, long-polling on min_bytes/max_wait_ms.

Records are returned exactly as stored: the log finds the segment and the batch through the
offset index and slices the file; nothing is parsed per record. ``max_bytes`` bounds the
response and ``partition_max_bytes`` each partition, except that the first non-empty
partition always returns at least one whole batch (KIP-74); a later partition whose next
batch does not fit in what is left returns nothing, as Kafka's ``ReplicaManager`` does.
Fetch sessions (KIP-227) are not created: every response has session id 0, so clients keep
sending full fetches. Transactions are not supported, so read_committed sees what
read_uncommitted sees.

Responses are encoded by hand (:func:`mirror.kafka.wire.encode_fetch_response`): the records
read from the log go to the socket as they are, not copied into a message first.
"""

from __future__ import annotations

from kafka.protocol.consumer import FetchRequest

from ...kafka.wire import FetchedPartition, FetchResponseData, encode_fetch_response
from ..errors import ApiError, kerr
from ..log import OffsetOutOfRangeError

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 12
REQUEST = FetchRequest

_EMPTY = memoryview(b"")


async def handle(request, version: int, state) -> FetchResponseData:
    if version >= 7 and request.session_id != 0:
        return FetchResponseData(throttle_time_ms=0, error_code=kerr.FetchSessionIdNotFoundError.errno, session_id=0,
                                 partitions=[])
    deadline = state.clock() + max(0, request.max_wait_ms)
    while True:
        partitions, total, errors = _read(request, state)
        remaining_ms = deadline - state.clock()
        if total >= request.min_bytes or errors or remaining_ms <= 0 or state.stopping:
            return FetchResponseData(throttle_time_ms=0, error_code=0, session_id=0, partitions=partitions)
        await state.appended.wait(remaining_ms / 1000)


def encode(response: FetchResponseData, version: int, correlation_id: int) -> list[bytes | memoryview]:
    """Framed, with every partition's records as the log's own view (not copied into a message)."""
    return encode_fetch_response(response, version=version, correlation_id=correlation_id)


def _read(request, state) -> tuple[list[FetchedPartition], int, bool]:
    budget = request.max_bytes
    total = 0
    errors = False
    partitions = []
    for fetch_topic in request.topics:
        for want in fetch_topic.partitions:
            error, high_watermark, log_start, records = 0, -1, -1, _EMPTY
            try:
                plog = state.topics.partition(fetch_topic.topic, want.partition).log
                high_watermark, log_start = plog.log_end_offset, plog.log_start_offset
                limit = min(want.partition_max_bytes, budget - total)
                if limit > 0 or total == 0:
                    # Only the first non-empty partition gets a whole batch beyond its limit (KIP-74);
                    # a later one whose next batch does not fit gets nothing, as from Kafka.
                    records = plog.read(want.fetch_offset, max(limit, 1), min_one_batch=total == 0)
                    total += len(records)
            except OffsetOutOfRangeError as exc:
                error, errors = kerr.OffsetOutOfRangeError.errno, True
                high_watermark, log_start = exc.log_end_offset, exc.log_start_offset
            except ApiError as exc:
                error, errors = exc.code, True
            # No transactions: the last stable offset is the high watermark, nothing is aborted.
            partitions.append(FetchedPartition(fetch_topic.topic, want.partition, error, high_watermark, high_watermark,
                                               log_start, None, records))
    return partitions, total, errors
