"""The hand-written Produce codec (``mirror.protocol.produce``) against kafka-python's generated
schemas, byte for byte at every version it covers: kafka-python is the independent reference
(its classes are generated from Kafka's own JSON message definitions), ours only avoids its
copies.

- Produce requests we encode are the bytes kafka-python encodes; kafka-python decodes ours.
- The broker side (requests decoded, responses encoded) round-trips with kafka-python likewise.
- Truncated or malformed input is a :class:`ProtocolError`, never ``struct.error``/``IndexError``.
- Plain Produce responses (the producer's fast path) read as kafka-python reads them; any
  other response, and any malformed one, is left to kafka-python (``None``).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from protocol_helpers import CLIENT_ID, batch

from mirror.kafka import ProtocolError
from mirror.protocol import (
    PRODUCE_VERSIONS,
    ProducedPartition,
    ProducePartition,
    ProduceResponseData,
    decode_plain_produce_response,
    decode_produce_request,
    decode_request_header,
    encode_produce_request,
    encode_produce_response,
)


PARTITIONS = [ProducePartition("orders", 0, batch(1)), ProducePartition("orders", 3, batch(2, 7)),
              ProducePartition("ü-topic", 1, batch(3)), ProducePartition("orders", 1, None)]


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
    records = bytearray(batch(9))
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
