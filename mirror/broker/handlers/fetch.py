"""Fetch (key 1), v4-13: raw stored bytes, long-polling on min_bytes/max_wait_ms.

Records are returned exactly as stored: the log finds the segment and the batch through the
offset index and slices the file; nothing is parsed per record. ``max_bytes`` bounds the
response and ``partition_max_bytes`` each partition, except that the first non-empty
partition always returns at least one whole batch (KIP-74); a later partition whose next
batch does not fit in what is left returns nothing, as Kafka's ``ReplicaManager`` does.
Fetch sessions (KIP-227) from v7, as Kafka serves them (:mod:`mirror.broker.fetch_sessions`):
a full fetch with epoch 0 gets a session, whose later requests name only what changed and
whose answers carry only the partitions with something new.

From v13 a request names each topic by its id (KIP-516), and so does the answer: an id no
topic has any more (the topic was deleted, or deleted and made again under its name) gets
UNKNOWN_TOPIC_ID for each of its partitions, as from Kafka's ``KafkaApis``, never the records
of the topic that holds the name now. A fetch session of v13 keeps its partitions by id too (as
Kafka's ``FetchSession`` keys them by ``TopicIdPartition``), so a session that began on the old
topic does not carry on into the new one: a partition it holds without naming it, whose name
another topic has now, gets INCONSISTENT_TOPIC_ID, as from Kafka (whose session reads it under
its name and finds a log of another id: ``Partition.checkTopicId``).

Isolation (KIP-98): every response reports the partition's last stable offset. A
read_committed fetch (isolation level 1) returns nothing from the LSO on, and lists the
aborted transactions that overlap the batches it returns as ``(producer_id, first_offset)``
(Kafka's ``collectAbortedTransactions``), so the consumer drops their records; the markers
themselves are returned too and clients skip them. read_uncommitted gets everything and a
null list.

Responses are encoded by hand (:func:`mirror.protocol.fetch.encode_fetch_response`): a
partition's records are not copied into a message. From ``SENDFILE_MIN_BYTES`` on they are
not even read: the response carries a :class:`~mirror.broker.log.FileRegion` of the segment
file, which the server sends with ``sendfile``, from the page cache to the socket (Kafka's
zero-copy fetch). A read_committed fetch lists the aborted transactions up to the slice's
upper bound, taken from the offset index as Kafka's is, not from the records' headers.
"""

from __future__ import annotations

import dataclasses
import uuid

from kafka.protocol.consumer import FetchRequest

from ...protocol import FetchedPartition, FetchResponseData, encode_fetch_response
from ..errors import ApiError, kerr
from ..fetch_sessions import FINAL_EPOCH, SessionError, Wanted
from ..log import FileRegion, OffsetOutOfRangeError
from ._api import Api

API = Api(key=1, min_version=4, max_version=13, request=FetchRequest)

_EMPTY = memoryview(b"")
READ_COMMITTED = 1
_SESSIONS_SINCE = 7
_TOPIC_IDS_SINCE = 13


def _key(topic, version: int) -> str:
    """How a request's topic is known here and in its fetch session: its name, or from v13 its
    id's text (read back by :func:`_partition`)."""
    return str(topic.topic_id) if version >= _TOPIC_IDS_SINCE else topic.topic


async def handle(request, version: int, state) -> FetchResponseData:
    wanted = [Wanted(_key(topic, version), want.partition, want.fetch_offset, want.partition_max_bytes)
              for topic in request.topics for want in topic.partitions]
    named = {(want.topic, want.partition) for want in wanted}
    if version >= _SESSIONS_SINCE:
        forgotten = [(_key(topic, version), index) for topic in request.forgotten_topics_data or ()
                     for index in topic.partitions]
        context = state.fetch_sessions.context(request.session_id, request.session_epoch, wanted, forgotten,
                                               state.clock())
    else:
        context = state.fetch_sessions.context(0, FINAL_EPOCH, wanted, (), state.clock())
    if isinstance(context, SessionError):
        return FetchResponseData(throttle_time_ms=0, error_code=context.error_code, session_id=0, partitions=[])
    deadline = state.clock() + max(0, request.max_wait_ms)
    while True:
        partitions, total, errors = _read(context.wanted, request, version, state, named)
        remaining_ms = deadline - state.clock()
        if total >= request.min_bytes or errors or remaining_ms <= 0 or state.stopping:
            session_id, answered = context.respond(partitions, state.clock())
            if version < _TOPIC_IDS_SINCE:
                return FetchResponseData(throttle_time_ms=0, error_code=0, session_id=session_id, partitions=answered)
            return _named(FetchResponseData(0, 0, session_id, answered), state)
        for part in partitions:  # read again when more has come: these are not sent
            if isinstance(part.records, FileRegion):
                part.records.close()
        await state.appended.wait(remaining_ms / 1000)


def encode(response: FetchResponseData, version: int, correlation_id: int) -> list[bytes | memoryview | FileRegion]:
    """Framed, with every partition's records as the log gave them: its view, or a region of
    the file for the server to send (not copied into a message)."""
    return encode_fetch_response(response, version=version, correlation_id=correlation_id)


def _named(response: FetchResponseData, state) -> FetchResponseData:
    """A v13 answer, whose partitions the session knew by their topic's id, with each topic's
    name again (what the rest of the broker, and its tests, read) and the ids to write: an id
    no topic has any more keeps its text for a name."""
    topic_ids: dict[str, uuid.UUID] = {}
    partitions = []
    for part in response.partitions:
        topic_id = uuid.UUID(part.topic)
        topic = state.topics.by_id(topic_id)
        name = topic.name if topic is not None else part.topic
        topic_ids[name] = topic_id
        partitions.append(dataclasses.replace(part, topic=name))
    return dataclasses.replace(response, partitions=partitions, topic_ids=topic_ids)


def _partition(state, key: str, index: int, version: int, named: bool):
    """The partition a request's topic key names: by name, or from v13 by id (``named``: in
    the request itself, not only held by its session)."""
    if version < _TOPIC_IDS_SINCE:
        return state.topics.partition(key, index)
    topic_id = uuid.UUID(key)
    topic = state.topics.by_id(topic_id)
    if topic is None:
        if not named and state.topics.former_name(topic_id) in state.topics.topics:
            raise ApiError(kerr.InconsistentTopicIdError, f"the topic under the name of {key} has another id")
        raise ApiError(kerr.UnknownTopicIdError, f"no topic has the id {key}")
    return state.topics.partition(topic.name, index)


def _read(wanted: tuple[Wanted, ...], request, version: int, state,
          named: set[tuple[str, int]]) -> tuple[list[FetchedPartition], int, bool]:
    """Every wanted partition, in order, within the request's ``max_bytes``."""
    budget = request.max_bytes
    total = 0
    errors = False
    partitions = []
    read_committed = request.isolation_level == READ_COMMITTED
    for want in wanted:
        error, high_watermark, last_stable, log_start, records, aborted = 0, -1, -1, -1, _EMPTY, None
        try:
            partition = _partition(state, want.topic, want.partition, version, (want.topic, want.partition) in named)
            plog = partition.log
            high_watermark, last_stable, log_start = plog.log_end_offset, partition.last_stable_offset, plog.log_start_offset
            limit = min(want.max_bytes, budget - total)
            if limit > 0 or total == 0:
                # Only the first non-empty partition gets a whole batch beyond its limit (KIP-74);
                # a later one whose next batch does not fit gets nothing, as from Kafka.
                records, upper_bound = plog.fetch(want.fetch_offset, max(limit, 1), min_one_batch=total == 0,
                                                  max_offset=last_stable if read_committed else None)
                total += len(records)
            else:
                upper_bound = want.fetch_offset
            if read_committed:
                aborted = tuple(partition.aborted_transactions(want.fetch_offset, upper_bound))
        except OffsetOutOfRangeError as exc:
            error, errors = kerr.OffsetOutOfRangeError.errno, True
            high_watermark, last_stable, log_start = exc.log_end_offset, exc.log_end_offset, exc.log_start_offset
        except ApiError as exc:
            error, errors = exc.code, True
        partitions.append(FetchedPartition(want.topic, want.partition, error, high_watermark, last_stable,
                                           log_start, aborted, records))
    return partitions, total, errors

