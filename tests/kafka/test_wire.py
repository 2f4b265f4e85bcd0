"""The hand-written Produce and Fetch codecs against kafka-python's generated schemas, byte for
byte at every version they cover: kafka-python is the independent reference (its classes are
generated from Kafka's own JSON message definitions), ours only avoids its copies.

- Produce requests we encode are the bytes kafka-python encodes; kafka-python decodes ours.
- Fetch requests likewise, for any partitions, offsets and sizes.
- Fetch responses kafka-python encodes decode to the same fields, records as views (no copy).
- The broker side (Produce decoded, Fetch encoded) round-trips with kafka-python likewise.
- Truncated or malformed input is a :class:`ProtocolError`, never ``struct.error``/``IndexError``.
- Plain Produce responses (the producer's fast path) read as kafka-python reads them; any
  other response, and any malformed one, is left to kafka-python (``None``).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

import kcodecs
from kcodecs import Record
from mirror.kafka import ProtocolError
from mirror.kafka.wire import (
    FETCH_VERSIONS,
    PRODUCE_VERSIONS,
    FetchPosition,
    FetchedPartition,
    FetchResponseData,
    ProducedPartition,
    ProducePartition,
    ProduceResponseData,
    decode_fetch_response,
    decode_plain_produce_response,
    decode_produce_request,
    decode_request_header,
    encode_fetch_request,
    encode_fetch_response,
    encode_produce_request,
    encode_produce_response,
)

CLIENT_ID = "kmirror-test"


def _batch(seed: int, n: int = 3) -> bytes:
    rnd = random.Random(seed)
    records = [Record(key=None, value=rnd.randbytes(rnd.randint(0, 60)), timestamp=1_700_000_000_000 + i) for i in range(n)]
    return kcodecs.build_batch(records, compression="none")


PARTITIONS = [ProducePartition("orders", 0, _batch(1)), ProducePartition("orders", 3, _batch(2, 7)),
              ProducePartition("ü-topic", 1, _batch(3)), ProducePartition("orders", 1, None)]


def _reference_produce(parts: list[ProducePartition], version: int, correlation_id: int, transactional_id) -> bytes:
    by_topic: dict[str, list] = {}
    for p in parts:
        by_topic.setdefault(p.topic, []).append(
            ProduceRequest.TopicProduceData.PartitionProduceData(index=p.partition, records=p.records))
    request = ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=30_000, topic_data=[
        ProduceRequest.TopicProduceData(name=name, partition_data=ps) for name, ps in by_topic.items()])
    request.API_VERSION = version
    request.with_header(correlation_id=correlation_id, client_id=CLIENT_ID)
    return bytes(request.encode(header=True, framed=True))


@pytest.mark.parametrize("version", list(PRODUCE_VERSIONS))
@pytest.mark.parametrize("transactional_id", [None, "txn-1"])
def test_produce_request_is_kafka_pythons_bytes(version, transactional_id):
    buffers = encode_produce_request(PARTITIONS, version=version, correlation_id=77, client_id=CLIENT_ID, acks=-1,
                                     timeout_ms=30_000, transactional_id=transactional_id)
    assert b"".join(bytes(b) for b in buffers) == _reference_produce(PARTITIONS, version, 77, transactional_id)


def test_produce_request_passes_record_buffers_through_uncopied():
    records = bytearray(_batch(9))
    view = memoryview(records)
    buffers = encode_produce_request([ProducePartition("t", 0, view)], version=9, correlation_id=1, client_id=None,
                                     acks=-1, timeout_ms=1)
    assert any(b is view for b in buffers)


@pytest.mark.parametrize("version", list(PRODUCE_VERSIONS))
def test_produce_request_decodes_what_kafka_python_encodes(version):
    framed = _reference_produce(PARTITIONS, version, 5, "tx")
    flexible = version >= 9
    header = decode_request_header(memoryview(framed)[4:], flexible=flexible)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (0, version, 5, CLIENT_ID)
    decoded = decode_produce_request(memoryview(framed)[4 + header.size:], version)
    assert (decoded.transactional_id, decoded.acks, decoded.timeout_ms) == ("tx", -1, 30_000)
    # kafka-python groups by topic in first-seen order; so does the encoder, so compare per topic.
    got = sorted((p.topic, p.partition, None if p.records is None else bytes(p.records)) for p in decoded.partitions)
    assert got == sorted((p.topic, p.partition, p.records) for p in PARTITIONS)


def _fetch_partitions(seed: int) -> list[FetchedPartition]:
    return [FetchedPartition("src", 0, 0, 120, 120, 7, None, memoryview(_batch(seed) + _batch(seed + 1))),
            FetchedPartition("src", 2, 1, 10, 10, 10, ((4, 99), (5, 100)), memoryview(b"")),
            FetchedPartition("other", 1, 0, 3, 3, 0, (), memoryview(_batch(seed + 2)))]


def _reference_fetch(parts: list[FetchedPartition], version: int, correlation_id: int) -> bytes:
    topics: list = []
    for p in parts:
        if not topics or topics[-1].topic != p.topic:
            topics.append(FetchResponse.FetchableTopicResponse(topic=p.topic, partitions=[]))
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
    decoded = decode_fetch_response(body, version)
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
    response = FetchResponseData(throttle_time_ms=3, error_code=0, session_id=0, partitions=parts)
    ours = b"".join(bytes(b) for b in encode_fetch_response(response, version=version, correlation_id=11))
    assert ours == _reference_fetch(parts, version, 11)


POSITIONS = [FetchPosition("orders", 2, 123_456_789_012, 1 << 20), FetchPosition("ü-topic", 0, 0, 7),
             FetchPosition("orders", 0, 5, 1)]
_FETCH_OPTIONS = dict(max_wait_ms=100, min_bytes=1, max_bytes=4 << 20)


def _reference_fetch_request(positions, version: int, correlation_id: int, isolation_level: int) -> bytes:
    """kafka-python's encoding of a consumer's full fetch (no session, no epochs, no rack)."""
    by_topic: dict[str, list] = {}
    for p in positions:
        by_topic.setdefault(p.topic, []).append(FetchRequest.FetchTopic.FetchPartition(
            partition=p.partition, fetch_offset=p.offset, log_start_offset=-1, partition_max_bytes=p.max_bytes))
    request = FetchRequest(replica_id=-1, isolation_level=isolation_level, session_id=0, session_epoch=-1, rack_id="",
                           forgotten_topics_data=[], **_FETCH_OPTIONS,
                           topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])
    request.API_VERSION = version
    request.with_header(correlation_id=correlation_id, client_id=CLIENT_ID)
    return bytes(request.encode(header=True, framed=True))


def _fetch_request(positions, version: int, correlation_id: int, isolation_level: int = 1) -> bytes:
    return b"".join(encode_fetch_request(positions, version=version, correlation_id=correlation_id, client_id=CLIENT_ID,
                                         isolation_level=isolation_level, **_FETCH_OPTIONS))


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


@pytest.mark.parametrize("version", [4, 11, 12])
def test_kafka_python_decodes_our_fetch_request(version):
    framed = _fetch_request(POSITIONS, version, 8)
    header = decode_request_header(framed[4:], flexible=version >= 12)
    decoded = FetchRequest.decode(framed[4 + header.size:], version=version)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (1, version, 8, CLIENT_ID)
    assert (decoded.replica_id, decoded.max_wait_ms, decoded.min_bytes, decoded.max_bytes, decoded.isolation_level) == \
        (-1, 100, 1, 4 << 20, 1)
    got = [(t.topic, p.partition, p.fetch_offset, p.partition_max_bytes) for t in decoded.topics for p in t.partitions]
    assert got == [("orders", 2, 123_456_789_012, 1 << 20), ("orders", 0, 5, 1), ("ü-topic", 0, 0, 7)]


def test_a_fetch_request_with_values_out_of_range_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="Fetch v12"):
        _fetch_request([FetchPosition("t", 0, 2**63, 1)], 12, 1)
    with pytest.raises(ProtocolError, match="Fetch v7"):
        _fetch_request([FetchPosition("t", -2**31 - 1, 0, 1)], 7, 1)
    with pytest.raises(ProtocolError, match="v13"):
        _fetch_request(POSITIONS, 13, 1)


@pytest.mark.parametrize("version", [4, 7, 12])
def test_every_truncation_of_a_fetch_response_is_a_protocol_error(version):
    framed = _reference_fetch(_fetch_partitions(5), version, 1)
    body = framed[_header_size(version):]
    for cut in range(len(body)):
        with pytest.raises(ProtocolError):
            decode_fetch_response(body[:cut], version)
    with pytest.raises(ProtocolError, match="left over"):
        decode_fetch_response(body + b"\x00", version)


@pytest.mark.parametrize("version", [3, 9, 12])
def test_every_truncation_of_a_produce_request_is_a_protocol_error(version):
    framed = _reference_produce(PARTITIONS, version, 1, None)
    header = decode_request_header(framed[4:], flexible=version >= 9)
    body = framed[4 + header.size:]
    for cut in range(len(body)):
        with pytest.raises(ProtocolError):
            decode_produce_request(body[:cut], version)


def test_versions_outside_the_hand_encoded_range_are_refused():
    with pytest.raises(ProtocolError, match="v13"):
        encode_produce_request(PARTITIONS, version=13, correlation_id=1, client_id=None, acks=-1, timeout_ms=1)
    with pytest.raises(ProtocolError, match="v3"):
        decode_fetch_response(b"", 3)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), version=st.sampled_from(list(FETCH_VERSIONS)))
def test_garbage_is_a_protocol_error_or_a_valid_decode(data, version):
    try:
        decode_fetch_response(data, version)
    except ProtocolError:
        pass


PRODUCED = [ProducedPartition("orders", 0, 0, 120, -1, 0, None), ProducedPartition("orders", 3, 0, 7, 1_700_000_000_123, 2, None),
            ProducedPartition("ü-topic", 1, 87, -1, -1, -1, "CRC mismatch"), ProducedPartition("orders", 1, 0, 9, -1, 0, None)]


def _reference_produce_response(parts: list[ProducedPartition], version: int, correlation_id: int) -> bytes:
    topic_class = ProduceResponse.TopicProduceResponse
    topics: list = []
    for p in parts:
        if not topics or topics[-1].name != p.topic:
            topics.append(topic_class(name=p.topic, partition_responses=[]))
        topics[-1].partition_responses.append(topic_class.PartitionProduceResponse(
            index=p.partition, error_code=p.error_code, base_offset=p.base_offset, log_append_time_ms=p.log_append_time_ms,
            log_start_offset=p.log_start_offset, record_errors=[], error_message=p.error_message))
    response = ProduceResponse(version=version, responses=topics, throttle_time_ms=4)
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


@pytest.mark.parametrize("version", list(PRODUCE_VERSIONS))
def test_produce_response_is_kafka_pythons_bytes(version):
    ours = encode_produce_response(ProduceResponseData(PRODUCED, throttle_time_ms=4), version=version, correlation_id=9)
    assert b"".join(ours) == _reference_produce_response(PRODUCED, version, 9)


def _body(framed: bytes, version: int) -> memoryview:
    """A response after its size, correlation id and (v9+) header tags."""
    return memoryview(framed)[4 + 4 + (1 if version >= 9 else 0):]


def _as_kafka_python_reads(body: memoryview, version: int) -> ProduceResponseData:
    decoded = ProduceResponse.decode(body, version=version)
    return ProduceResponseData([
        ProducedPartition(t.name, p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset,
                          p.error_message)
        for t in decoded.responses for p in t.partition_responses], decoded.throttle_time_ms)


PLAIN = [p for p in PRODUCED if p.error_message is None]
FLEXIBLE_PRODUCE = [v for v in PRODUCE_VERSIONS if v >= 9]


@pytest.mark.parametrize("version", FLEXIBLE_PRODUCE)
def test_a_plain_produce_response_reads_as_kafka_python_reads_it(version):
    body = _body(_reference_produce_response(PLAIN, version, 3), version)
    ours = decode_plain_produce_response(body, version)
    assert ours is not None and ours == _as_kafka_python_reads(body, version)
    assert ours.throttle_time_ms == 4 and [p.partition for p in ours.partitions] == [0, 3, 1]


_names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30).filter(
    lambda name: len(name.encode()) < 127)
_plain_partitions = st.builds(ProducedPartition, topic=_names, partition=st.integers(0, 2**31 - 1),
                              error_code=st.integers(-1, 120), base_offset=st.integers(-1, 2**63 - 1),
                              log_append_time_ms=st.integers(-1, 2**63 - 1), log_start_offset=st.integers(-1, 2**63 - 1))


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(_plain_partitions, max_size=12), version=st.sampled_from(FLEXIBLE_PRODUCE))
def test_plain_produce_responses_of_any_content_read_as_kafka_python_reads_them(parts, version):
    body = _body(_reference_produce_response(parts, version, 1), version)
    assert decode_plain_produce_response(body, version) == _as_kafka_python_reads(body, version)


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_other_produce_responses_are_left_to_kafka_python(version):
    """An error message, record errors, or a classic version: not plain."""
    assert decode_plain_produce_response(_body(_reference_produce_response(PRODUCED, version, 3), version), version) \
        is None
    if version >= 9:
        topic_class = ProduceResponse.TopicProduceResponse
        part = topic_class.PartitionProduceResponse(index=0, error_code=18, base_offset=-1, log_append_time_ms=-1,
                                                    log_start_offset=0, error_message=None, record_errors=[
                                                        topic_class.PartitionProduceResponse.BatchIndexAndErrorMessage(
                                                            batch_index=2, batch_index_error_message="bad record")])
        response = ProduceResponse(version=version, responses=[topic_class(name="t", partition_responses=[part])],
                                   throttle_time_ms=0)
        response.with_header(correlation_id=1)
        framed = bytes(response.encode(header=True, framed=True))
        assert decode_plain_produce_response(_body(framed, version), version) is None
    else:
        assert decode_plain_produce_response(_body(_reference_produce_response(PLAIN, version, 3), version), version) \
            is None


@pytest.mark.parametrize("version", [9, 11])
def test_a_damaged_plain_produce_response_is_never_misread(version):
    """Every prefix, an extra byte, and every byte changed: either left to kafka-python, or
    read exactly as kafka-python reads the same bytes."""
    body = bytes(_body(_reference_produce_response(PLAIN, version, 3), version))
    for cut in range(len(body)):
        assert decode_plain_produce_response(memoryview(body[:cut]), version) is None
    assert decode_plain_produce_response(memoryview(body + b"\x00"), version) is None
    for position in range(len(body)):
        for value in (0x00, 0x01, 0x7F, 0x80, 0xFF, body[position] ^ 0x01):
            damaged = bytearray(body)
            damaged[position] = value
            ours = decode_plain_produce_response(memoryview(damaged), version)
            if ours is not None:
                assert ours == _as_kafka_python_reads(memoryview(damaged), version), (position, value)


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_kafka_python_decodes_our_produce_response(version):
    framed = b"".join(encode_produce_response(ProduceResponseData(PRODUCED), version=version, correlation_id=1))
    decoded = ProduceResponse.decode(framed[4 + 4 + (1 if version >= 9 else 0):], version=version)
    got = [(t.name, p.index, p.error_code, p.base_offset) for t in decoded.responses for p in t.partition_responses]
    assert got == [(p.topic, p.partition, p.error_code, p.base_offset) for p in PRODUCED]
