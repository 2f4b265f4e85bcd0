"""Produce (key 0), v3-12: acks 0, 1 and -1; one v2 batch per partition; idempotent and
transactional producers.

Offsets are assigned by patching the batch header (KIP-31) and LogAppendTime topics are
stamped in place (KIP-32), see :mod:`mirror.broker.validator`. With a single replica,
acks=1 and acks=-1 both answer once the batch is in the log (and on disk when the broker's
flush policy is ``always``). acks=0 gets no response at all. A rejected batch appends
nothing and the connection stays usable.

A transactional batch needs the request's ``transactional_id`` (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka answers) and is verified with the
coordinator first, as Kafka 3.6+ does (KIP-890 part 1): it must come from the id's current
producer id and epoch, inside an Ongoing transaction to which AddPartitionsToTxn added this
partition. That is asked once per transaction and partition: later batches find the
transaction open in the partition's producer state (Kafka's ``hasOngoingTransaction``).
From v12 (transactions v2, KIP-890 part 2) the first batch of a transaction on a partition
adds the partition to it, starting the transaction if need be, as Kafka's leader does on the
producer's behalf: no AddPartitionsToTxn comes.
Refusals are what Kafka's ``AddPartitionsToTxnManager`` and ``ReplicaManager`` give a
producer: INVALID_PRODUCER_ID_MAPPING; INVALID_PRODUCER_EPOCH for a fenced epoch
(librdkafka then fails fatally as fenced); INVALID_TXN_STATE for a partition not in the
transaction (TRANSACTION_ABORTABLE from v11); NOT_ENOUGH_REPLICAS, retriable, while the
transaction's markers are being written.

Requests are decoded and responses encoded by hand (:mod:`mirror.protocol.produce`): each
partition's records are a view of the request frame, not a copy as kafka-python's decoder
makes, and the validator's working copy is the only one before the log write; the answer
costs a few microseconds instead of kafka-python's objects per partition.
"""

from __future__ import annotations

import logging

from kafka.protocol.producer import ProduceRequest

from ...protocol import (
    ProducedPartition,
    ProducePartition,
    ProduceRequestData,
    ProduceResponseData,
    decode_produce_request,
    decode_request_header,
    encode_produce_response,
    is_flexible_produce,
)
from ..errors import ApiError, kerr
from ..log import RecordBatchTooLargeError
from ..topics import Verifier
from ._api import Api

API = Api(key=0, min_version=3, max_version=12, request=ProduceRequest)

IMPLICIT_ADD = 12
"""The first Produce version whose transactional batches add their partition (transactions v2)."""

log = logging.getLogger(__name__)


def decode(frame: memoryview, version: int) -> ProduceRequestData:
    """The request after its size prefix: header, then body with record sets as views."""
    header = decode_request_header(frame, flexible=is_flexible_produce(version))
    return decode_produce_request(frame[header.size:], version)


async def handle(request: ProduceRequestData, version: int, state) -> ProduceResponseData | None:
    now_ms = state.clock()
    results = [_append(request, part, now_ms, state, version) for part in request.partitions]
    if any(wrote for _, wrote in results):
        state.appended.notify()
    if request.acks == 0:
        return None
    return ProduceResponseData([result for result, _ in results])


def encode(response: ProduceResponseData, version: int, correlation_id: int) -> list[bytes]:
    return encode_produce_response(response, version=version, correlation_id=correlation_id)


def _append(request: ProduceRequestData, part: ProducePartition, now_ms: int, state,
            version: int) -> tuple[ProducedPartition, bool]:
    """One partition's batch into its log; the answer, and whether anything was written."""
    result = ProducedPartition(part.topic, part.partition)
    try:
        if request.acks not in (0, 1, -1):
            raise ApiError(kerr.InvalidRequiredAcksError, f"acks must be 0, 1 or -1, got {request.acks}")
        if part.records is None:
            raise ApiError(kerr.CorruptRecordError, "null records")
        partition = state.topics.partition(part.topic, part.partition)
        verify = _verifier(request.transactional_id, (part.topic, part.partition), version, state)
        outcome = partition.append(part.records, now_ms, verify=verify)
        result.base_offset = outcome.base_offset
        result.log_append_time_ms = outcome.log_append_time
        result.log_start_offset = partition.log.log_start_offset
        return result, not outcome.duplicate
    except ApiError as exc:
        log.info("produce to %s-%d rejected: %s", part.topic, part.partition, exc)
        result.error_code, result.error_message = exc.code, exc.message
    except RecordBatchTooLargeError as exc:  # larger than a whole segment, as Kafka's Log.append says
        log.info("produce to %s-%d rejected: %s", part.topic, part.partition, exc)
        result.error_code, result.error_message = kerr.RecordListTooLargeError.errno, str(exc)
    except OSError as exc:
        log.error("produce to %s-%d failed to write: %s", part.topic, part.partition, exc)
        result.error_code, result.error_message = kerr.KafkaStorageError.errno, str(exc)
    return result, False


def _verifier(transactional_id: str | None, partition: tuple[str, int], version: int, state) -> Verifier:
    def verify(batch, ongoing: bool) -> None:
        if transactional_id is None:
            raise ApiError(kerr.TransactionalIdAuthorizationFailedError,
                           "transactional batches need the request's transactional_id")
        if ongoing:  # the transaction's first batch here was verified, as Kafka's ReplicaManager skips it then
            return
        try:
            if version >= IMPLICIT_ADD and state.config.transaction_version >= 2:
                state.transactions.add_partitions(transactional_id, batch.producer_id, batch.producer_epoch,
                                                  [partition])
            else:
                state.transactions.verify(transactional_id, batch.producer_id, batch.producer_epoch, partition)
        except ApiError as exc:
            raise _as_produce_error(exc, version) from exc

    return verify


def _as_produce_error(exc: ApiError, version: int) -> ApiError:
    """The coordinator's verdict as Kafka's produce path reports it to the producer."""
    if exc.error is kerr.ProducerFencedError:
        return ApiError(kerr.InvalidProducerEpochError, exc.message)
    if exc.error in (kerr.ConcurrentTransactionsError, kerr.CoordinatorNotAvailableError):
        return ApiError(kerr.NotEnoughReplicasError, f"unable to verify the partition is in the transaction: {exc.message}")
    if exc.error is kerr.InvalidTxnStateError and version >= 11:
        return ApiError(kerr.TransactionAbortableError, exc.message)
    return exc
