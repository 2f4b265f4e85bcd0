"""The hand-written Fetch codec (``mirror.protocol.fetch``) against kafka-python's generated
schemas, byte for byte at every version it covers: kafka-python is the independent reference
(its classes are generated from Kafka's own JSON message definitions), ours only avoids its
copies.

- Fetch requests we encode are the bytes kafka-python encodes, for any partitions, offsets
  and sizes; kafka-python decodes ours.
- Fetch responses kafka-python encodes decode to the same fields, records as views (no copy).
- The broker side (responses encoded) is kafka-python's bytes likewise.
- Truncated or malformed input is a :class:`ProtocolError`, never ``struct.error``/``IndexError``.
- From v13 topics are named by topic id (KIP-516), in requests and responses alike.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchRequest, FetchResponse
from protocol_helpers import CLIENT_ID, batch

from mirror.kafka import ProtocolError
from mirror.protocol import (
    FETCH_VERSIONS,
    FetchedPartition,
    FetchPosition,
    FetchResponseData,
    decode_fetch_response,
    decode_request_header,
    encode_fetch_request,
    encode_fetch_response,
)


IDS = {name: uuid.uuid5(uuid.NAMESPACE_URL, name) for name in ("src", "other", "orders", "ü-topic", "a", "t")}
"""Each test topic's id, for the versions that name topics by id (v13+)."""
NAMES = {topic_id: name for name, topic_id in IDS.items()}


def _fetch_partitions(seed: int) -> list[FetchedPartition]:
    return [FetchedPartition("src", 0, 0, 120, 120, 7, None, memoryview(batch(seed) + batch(seed + 1))),
            FetchedPartition("src", 2, 1, 10, 10, 10, ((4, 99), (5, 100)), memoryview(b"")),
            FetchedPartition("other", 1, 0, 3, 3, 0, (), memoryview(batch(seed + 2)))]


def _reference_fetch(parts: list[FetchedPartition], version: int, correlation_id: int) -> bytes:
    topics: list = []
    for p in parts:
        if not topics or topics[-1].topic != p.topic:
            topics.append(FetchResponse.FetchableTopicResponse(topic=p.topic, topic_id=IDS[p.topic], partitions=[]))
        aborted = None if p.aborted_transactions is None else [
            FetchResponse.FetchableTopicResponse.PartitionData.AbortedTransaction(producer_id=a, first_offset=b)
            for a, b in p.aborted_transactions]
        topics[-1].partitions.append(FetchResponse.FetchableTopicResponse.PartitionData(
            partition_index=p.partition, error_code=p.error_code, high_watermark=p.high_watermark,
            last_stable_offset=p.last_stable_offset, log_start_offset=p.log_start_offset,
            aborted_transactions=aborted, preferred_read_replica=-1, records=bytes(p.records)))
    response = FetchResponse(throttle_time_ms=3, error_code=0, session_id=0, responses=topics)
    response.API_VERSION = version
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


def _header_size(version: int) -> int:
    return 4 + 4 + (1 if version >= 12 else 0)  # size prefix, correlation id, tagged fields


@pytest.mark.parametrize("version", list(FETCH_VERSIONS))
def test_fetch_response_decodes_kafka_pythons_bytes_without_copying(version):
    parts = _fetch_partitions(version)
    framed = bytearray(_reference_fetch(parts, version, 11))
    body = memoryview(framed)[_header_size(version):]
    decoded = decode_fetch_response(body, version, NAMES)
    assert decoded.throttle_time_ms == 3 and decoded.error_code == 0 and decoded.session_id == 0
    for got, want in zip(decoded.partitions, parts, strict=True):
        assert (got.topic, got.partition, got.error_code, got.high_watermark, got.last_stable_offset) == \
               (want.topic, want.partition, want.error_code, want.high_watermark, want.last_stable_offset)
        assert got.log_start_offset == (want.log_start_offset if version >= 5 else -1)
        assert got.aborted_transactions == want.aborted_transactions
        assert bytes(got.records) == bytes(want.records)
    # Views of the response buffer: a write through one shows in the buffer (in-place rewrites).
    first = decoded.partitions[0].records
    first[0] ^= 0xFF
    assert bytes(first) in bytes(framed)


@pytest.mark.parametrize("version", list(FETCH_VERSIONS))
def test_fetch_response_encodes_kafka_pythons_bytes(version):
    parts = _fetch_partitions(100 + version)
    response = FetchResponseData(throttle_time_ms=3, error_code=0, session_id=0, partitions=parts,
                                 topic_ids=IDS if version >= 13 else None)
    ours = b"".join(bytes(b) for b in encode_fetch_response(response, version=version, correlation_id=11))
    assert ours == _reference_fetch(parts, version, 11)


POSITIONS = [FetchPosition("orders", 2, 123_456_789_012, 1 << 20), FetchPosition("ü-topic", 0, 0, 7),
             FetchPosition("orders", 0, 5, 1)]
_FETCH_OPTIONS = dict(max_wait_ms=100, min_bytes=1, max_bytes=4 << 20)


def _reference_fetch_request(positions, version: int, correlation_id: int, isolation_level: int,
                             session: tuple[int, int] = (0, -1), forgotten=()) -> bytes:
    """kafka-python's encoding of a consumer's fetch (no epochs, no rack): full by default, or a
    fetch session's ``session`` (id, epoch) forgetting ``forgotten`` (topic, partition) pairs."""
    by_topic: dict[str, list] = {}
    for p in positions:
        by_topic.setdefault(p.topic, []).append(FetchRequest.FetchTopic.FetchPartition(
            partition=p.partition, fetch_offset=p.offset, log_start_offset=-1, partition_max_bytes=p.max_bytes))
    topics = [FetchRequest.FetchTopic(topic=t, topic_id=IDS[t], partitions=ps) for t, ps in by_topic.items()]
    dropped: dict[str, list[int]] = {}
    for topic, partition in forgotten:
        dropped.setdefault(topic, []).append(partition)
    request = FetchRequest(replica_id=-1, isolation_level=isolation_level, session_id=session[0],
                           session_epoch=session[1], rack_id="", **_FETCH_OPTIONS,
                           forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=t, topic_id=IDS[t], partitions=ps)
                                                  for t, ps in dropped.items()],
                           topics=topics)
    request.API_VERSION = version
    request.with_header(correlation_id=correlation_id, client_id=CLIENT_ID)
    return bytes(request.encode(header=True, framed=True))


def _fetch_request(positions, version: int, correlation_id: int, isolation_level: int = 1, **session) -> bytes:
    return b"".join(encode_fetch_request(positions, version=version, correlation_id=correlation_id, client_id=CLIENT_ID,
                                         isolation_level=isolation_level, topic_ids=IDS, **_FETCH_OPTIONS,
                                         **session))


@pytest.mark.parametrize("version", list(FETCH_VERSIONS))
@pytest.mark.parametrize("isolation_level", [0, 1])
def test_fetch_request_is_kafka_pythons_bytes(version, isolation_level):
    assert _fetch_request(POSITIONS, version, 21, isolation_level) == \
        _reference_fetch_request(POSITIONS, version, 21, isolation_level)


@settings(max_examples=200, deadline=None)
@given(positions=st.lists(st.builds(FetchPosition, st.sampled_from(["a", "orders", "ü-topic"]),
                                    st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1), st.integers(0, 2**31 - 1)),
                          max_size=6),
       version=st.sampled_from(list(FETCH_VERSIONS)))
def test_fetch_requests_of_any_content_are_kafka_pythons_bytes(positions, version):
    assert _fetch_request(positions, version, 3) == _reference_fetch_request(positions, version, 3, 1)


SESSION_VERSIONS = [v for v in FETCH_VERSIONS if v >= 7]


@settings(max_examples=200, deadline=None)
@given(positions=st.lists(st.builds(FetchPosition, st.sampled_from(["a", "orders", "ü-topic"]),
                                    st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1), st.integers(0, 2**31 - 1)),
                          max_size=4),
       forgotten=st.lists(st.tuples(st.sampled_from(["a", "orders", "ü-topic"]), st.integers(0, 2**31 - 1)),
                          max_size=5),
       session=st.tuples(st.integers(0, 2**31 - 1), st.integers(-1, 2**31 - 1)),
       version=st.sampled_from(SESSION_VERSIONS))
def test_fetch_session_requests_are_kafka_pythons_bytes(positions, forgotten, session, version):
    """A session's request (KIP-227): its id and epoch, and the partitions it forgets grouped by topic."""
    ours = _fetch_request(positions, version, 5, session_id=session[0], session_epoch=session[1], forgotten=forgotten)
    assert ours == _reference_fetch_request(positions, version, 5, 1, session, forgotten)


def test_kafka_python_decodes_a_session_request_we_encode():
    framed = _fetch_request(POSITIONS[:1], 12, 9, session_id=77, session_epoch=3,
                            forgotten=[("orders", 1), ("a", 0), ("orders", 4)])
    header = decode_request_header(framed[4:], flexible=True)
    decoded = FetchRequest.decode(framed[4 + header.size:], version=12)
    assert (decoded.session_id, decoded.session_epoch) == (77, 3)
    assert [(t.topic, list(t.partitions)) for t in decoded.forgotten_topics_data] == [("orders", [1, 4]), ("a", [0])]


def test_a_session_on_a_version_without_sessions_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="no fetch sessions"):
        _fetch_request(POSITIONS, 6, 1, session_id=1, session_epoch=1)


@pytest.mark.parametrize("version", [4, 11, 12, 13])
def test_kafka_python_decodes_our_fetch_request(version):
    framed = _fetch_request(POSITIONS, version, 8)
    header = decode_request_header(framed[4:], flexible=version >= 12)
    decoded = FetchRequest.decode(framed[4 + header.size:], version=version)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (1, version, 8, CLIENT_ID)
    assert (decoded.replica_id, decoded.max_wait_ms, decoded.min_bytes, decoded.max_bytes, decoded.isolation_level) == \
        (-1, 100, 1, 4 << 20, 1)
    got = [(t.topic if version < 13 else NAMES[t.topic_id], p.partition, p.fetch_offset, p.partition_max_bytes)
           for t in decoded.topics for p in t.partitions]
    assert got == [("orders", 2, 123_456_789_012, 1 << 20), ("orders", 0, 5, 1), ("ü-topic", 0, 0, 7)]


def test_kafka_python_decodes_a_v13_session_request_that_forgets_by_id():
    framed = _fetch_request(POSITIONS[:1], 13, 9, session_id=77, session_epoch=3, forgotten=[("a", 0), ("orders", 4)])
    header = decode_request_header(framed[4:], flexible=True)
    decoded = FetchRequest.decode(framed[4 + header.size:], version=13)
    assert [(t.topic_id, list(t.partitions)) for t in decoded.forgotten_topics_data] == \
        [(IDS["a"], [0]), (IDS["orders"], [4])]


def test_v13_without_a_topics_id_is_a_protocol_error_naming_it():
    with pytest.raises(ProtocolError, match="no topic ids given"):
        b"".join(encode_fetch_request(POSITIONS, version=13, correlation_id=1, client_id=CLIENT_ID,
                                      isolation_level=1, **_FETCH_OPTIONS))
    with pytest.raises(ProtocolError, match="'ü-topic'"):
        b"".join(encode_fetch_request(POSITIONS, version=13, correlation_id=1, client_id=CLIENT_ID, isolation_level=1,
                                      topic_ids={"orders": IDS["orders"]}, **_FETCH_OPTIONS))


def test_a_v13_answer_about_an_id_the_request_did_not_name_is_a_protocol_error():
    framed = _reference_fetch(_fetch_partitions(3), 13, 1)
    with pytest.raises(ProtocolError, match=str(IDS["src"])):
        decode_fetch_response(framed[_header_size(13):], 13, {IDS["other"]: "other"})


def test_a_fetch_request_with_values_out_of_range_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="Fetch v12"):
        _fetch_request([FetchPosition("t", 0, 2**63, 1)], 12, 1)
    with pytest.raises(ProtocolError, match="Fetch v7"):
        _fetch_request([FetchPosition("t", -2**31 - 1, 0, 1)], 7, 1)
    with pytest.raises(ProtocolError, match="v14"):
        _fetch_request(POSITIONS, 14, 1)


@pytest.mark.parametrize("version", [4, 7, 12, 13])
def test_every_truncation_of_a_fetch_response_is_a_protocol_error(version):
    framed = _reference_fetch(_fetch_partitions(5), version, 1)
    body = framed[_header_size(version):]
    for cut in range(len(body)):
        with pytest.raises(ProtocolError):
            decode_fetch_response(body[:cut], version, NAMES)
    with pytest.raises(ProtocolError, match="left over"):
        decode_fetch_response(body + b"\x00", version, NAMES)


def test_versions_outside_the_hand_encoded_range_are_refused():
    with pytest.raises(ProtocolError, match="v3"):
        decode_fetch_response(b"", 3)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), version=st.sampled_from(list(FETCH_VERSIONS)))
def test_garbage_is_a_protocol_error_or_a_valid_decode(data, version):
    try:
        decode_fetch_response(data, version, NAMES)
    except ProtocolError:
        pass
