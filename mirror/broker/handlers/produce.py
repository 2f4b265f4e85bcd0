"""Produce (key 0), v3-11: acks 0, 1 and -1; one v2 batch per partition.

Offsets are assigned by patching the batch header (KIP-31) and LogAppendTime topics are
stamped in place (KIP-32), see :mod:`mirror.broker.validator`. With a single replica,
acks=1 and acks=-1 both answer once the batch is in the log (and on disk when the broker's
flush policy is ``always``). acks=0 gets no response at all. A rejected batch appends
nothing and the connection stays usable.
"""

from __future__ import annotations

import logging

from kafka.protocol.producer import ProduceRequest, ProduceResponse

from ..errors import ApiError, kerr
from ..log import RecordBatchTooLargeError

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 11
REQUEST = ProduceRequest

log = logging.getLogger(__name__)
TopicResult = ProduceResponse.TopicProduceResponse
PartitionResult = TopicResult.PartitionProduceResponse


async def handle(request, version: int, state) -> ProduceResponse | None:
    now_ms = state.clock()
    acks_ok = request.acks in (0, 1, -1)
    appended = False
    topics = []
    for topic_data in request.topic_data:
        partitions = []
        for part in topic_data.partition_data:
            result = PartitionResult(index=part.index, error_code=0, base_offset=-1, log_append_time_ms=-1,
                                     log_start_offset=-1, record_errors=[], error_message=None)
            try:
                if not acks_ok:
                    raise ApiError(kerr.InvalidRequiredAcksError, f"acks must be 0, 1 or -1, got {request.acks}")
                if request.transactional_id is not None:
                    raise ApiError(kerr.TransactionalIdAuthorizationFailedError,
                                   "transactions are not supported by the embedded broker")
                if part.records is None:
                    raise ApiError(kerr.CorruptRecordError, "null records")
                partition = state.topics.partition(topic_data.name, part.index)
                outcome = partition.append(part.records, now_ms)
                appended = appended or not outcome.duplicate
                result.base_offset = outcome.base_offset
                result.log_append_time_ms = outcome.log_append_time
                result.log_start_offset = partition.log.log_start_offset
            except ApiError as exc:
                log.info("produce to %s-%d rejected: %s", topic_data.name, part.index, exc)
                result.error_code, result.error_message = exc.code, exc.message
            except RecordBatchTooLargeError as exc:  # larger than a whole segment, as Kafka's Log.append says
                log.info("produce to %s-%d rejected: %s", topic_data.name, part.index, exc)
                result.error_code, result.error_message = kerr.RecordListTooLargeError.errno, str(exc)
            except OSError as exc:
                log.error("produce to %s-%d failed to write: %s", topic_data.name, part.index, exc)
                result.error_code, result.error_message = kerr.KafkaStorageError.errno, str(exc)
            partitions.append(result)
        topics.append(TopicResult(name=topic_data.name, partition_responses=partitions))
    if appended:
        state.appended.notify()
    if request.acks == 0:
        return None
    return ProduceResponse(version=version, responses=topics, throttle_time_ms=0)
