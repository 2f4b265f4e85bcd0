"""Fetch (key 1), v4-12: raw stored bytes, long-polling on min_bytes/max_wait_ms.

Records are returned exactly as stored: the log finds the segment and the batch through the
offset index and slices the file; nothing is parsed per record. ``max_bytes`` bounds the
response and ``partition_max_bytes`` each partition, except that the first non-empty
partition always returns at least one whole batch (KIP-74); a later partition whose
next batch does not fit in what is left returns nothing, as Kafka's ``ReplicaManager`` does. Fetch sessions (KIP-227) are not
created: every response has session id 0, so clients keep sending full fetches.
Transactions are not supported, so read_committed sees what read_uncommitted sees.
"""

from __future__ import annotations

from kafka.protocol.consumer import FetchRequest, FetchResponse

from ..errors import ApiError, kerr
from ..log import OffsetOutOfRangeError

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 12
REQUEST = FetchRequest

TopicResult = FetchResponse.FetchableTopicResponse
PartitionResult = TopicResult.PartitionData


async def handle(request, version: int, state) -> FetchResponse:
    if version >= 7 and request.session_id != 0:
        return FetchResponse(version=version, throttle_time_ms=0, error_code=kerr.FetchSessionIdNotFoundError.errno,
                             session_id=0, responses=[])
    deadline = state.clock() + max(0, request.max_wait_ms)
    while True:
        topics, total, errors = _read(request, version, state)
        remaining_ms = deadline - state.clock()
        if total >= request.min_bytes or errors or remaining_ms <= 0 or state.stopping:
            return FetchResponse(version=version, throttle_time_ms=0, error_code=0, session_id=0, responses=topics)
        await state.appended.wait(remaining_ms / 1000)


def _read(request, version: int, state) -> tuple[list, int, bool]:
    budget = request.max_bytes if version >= 3 else 1 << 31
    total = 0
    errors = False
    topics = []
    for fetch_topic in request.topics:
        partitions = []
        for want in fetch_topic.partitions:
            result = PartitionResult(partition_index=want.partition, error_code=0, high_watermark=-1,
                                     last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                                     preferred_read_replica=-1, records=b"")
            try:
                plog = state.topics.partition(fetch_topic.topic, want.partition).log
                result.high_watermark = result.last_stable_offset = plog.log_end_offset
                result.log_start_offset = plog.log_start_offset
                limit = min(want.partition_max_bytes, budget - total)
                if limit > 0 or total == 0:
                    # Only the first non-empty partition gets a whole batch beyond its limit (KIP-74);
                    # a later one whose next batch does not fit gets nothing, as from Kafka.
                    # The encoder copies the memoryview into the response; no copy of our own.
                    data = plog.read(want.fetch_offset, max(limit, 1), min_one_batch=total == 0)
                    result.records = data
                    total += len(data)
            except OffsetOutOfRangeError as exc:
                result.error_code, errors = kerr.OffsetOutOfRangeError.errno, True
                result.high_watermark, result.log_start_offset = exc.log_end_offset, exc.log_start_offset
            except ApiError as exc:
                result.error_code, errors = exc.code, True
            partitions.append(result)
        topics.append(TopicResult(topic=fetch_topic.topic, partitions=partitions))
    return topics, total, errors
