"""Malformed frames, unknown APIs, bad batches: the client gets an error or a closed
connection, the broker keeps serving everyone else, and no log is touched."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import ProduceRequest

import kcodecs
from kcodecs import ControlType, Record

from mirror.broker import EmbeddedBroker
from mirror.kafka import KafkaConnection as Wire

CORRUPT_MESSAGE, UNKNOWN_TOPIC, MESSAGE_TOO_LARGE, UNSUPPORTED_VERSION = 2, 3, 10, 35
OUT_OF_ORDER_SEQUENCE, INVALID_RECORD = 45, 87


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data", max_request_bytes=1 << 20) as running:
        wire = Wire(running.bootstrap)
        topic = CreateTopicsRequest.CreatableTopic
        config = topic.CreatableTopicConfig
        response = wire.call(CreateTopicsRequest(topics=[
            topic(name="t", num_partitions=1, replication_factor=1, assignments=[],
                  configs=[config(name="max.message.bytes", value="4096")]),
        ], timeout_ms=1000, validate_only=False), version=5)
        assert [t.error_code for t in response.topics] == [0]
        wire.close()
        yield running


def produce(wire: Wire, records: bytes, topic: str = "t", version: int = 9):
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[
        data(name=topic, partition_data=[data.PartitionProduceData(index=0, records=records)])])
    (topic_response,) = wire.call(request, version=version).responses
    (partition,) = topic_response.partition_responses
    return partition


def log_end(broker: EmbeddedBroker) -> int:
    return broker.state.topics.partition("t", 0).log.log_end_offset


def metadata_works(broker: EmbeddedBroker) -> bool:
    wire = Wire(broker.bootstrap)
    try:
        return [t.name for t in wire.call(MetadataRequest(topics=None), version=9).topics] == ["t"]
    finally:
        wire.close()


def batch(*values: bytes, **options) -> bytes:
    return kcodecs.build_batch([Record(value=v, timestamp=1) for v in values], **options)


@pytest.mark.parametrize("frame", [
    struct.pack(">i", (1 << 20) + 1) + b"\0" * 64,        # over socket.request.max.bytes
    struct.pack(">i", -5),                                # negative size
    struct.pack(">ihhi", 8, 9999, 0, 1),                  # unknown API key
    struct.pack(">ihhi", 8, 3, 99, 1),                    # Metadata v99
    struct.pack(">ihhi", 12, 0, 9, 1) + b"\xff\xff\xff\xff",  # Produce v9 with a garbage body
], ids=["oversized", "negative-size", "unknown-api", "unsupported-version", "garbage-body"])
def test_bad_frames_close_only_their_connection(broker, frame):
    wire = Wire(broker.bootstrap)
    wire.send_raw(frame)
    assert wire.is_closed()
    assert metadata_works(broker)
    assert log_end(broker) == 0


def test_api_versions_above_ours_gets_the_v0_fallback(broker):
    wire = Wire(broker.bootstrap)
    wire.send_raw(struct.pack(">ihhih", 10, 18, 99, 7, -1))
    response = ApiVersionsResponse.decode(wire.read_frame(), version=0, header=True)
    assert response.header.correlation_id == 7
    assert response.error_code == UNSUPPORTED_VERSION
    assert {k.api_key for k in response.api_keys} >= {0, 1, 2, 3, 18, 19, 22, 32}


@pytest.mark.parametrize("make, code", [
    (lambda: bytes(_flip(batch(b"payload", compression="gzip"), -3)), CORRUPT_MESSAGE),
    (lambda: batch(b"v")[:-4], CORRUPT_MESSAGE),
    (lambda: batch(b"v") + b"\x00\x00\x00", CORRUPT_MESSAGE),  # Kafka would trim them silently
    (lambda: batch(b"x" * 5000), MESSAGE_TOO_LARGE),
    (lambda: batch(b"one") + batch(b"two"), INVALID_RECORD),
    (lambda: kcodecs.build_batch([kcodecs.control_record(ControlType.COMMIT)], control=True), INVALID_RECORD),
    (lambda: kcodecs.build_batch([Record(value=b"v", timestamp=1)], magic=1), INVALID_RECORD),
], ids=["bad-crc", "truncated", "trailing-bytes", "too-large", "two-batches", "control", "magic-1"])
def test_rejected_batches_append_nothing_and_keep_the_connection(broker, make, code):
    wire = Wire(broker.bootstrap)
    result = produce(wire, make())
    assert result.error_code == code
    assert result.error_message
    assert log_end(broker) == 0
    ok = produce(wire, batch(b"fine"))  # same connection still serves
    assert (ok.error_code, ok.base_offset) == (0, 0)
    assert log_end(broker) == 1


def test_unknown_topic(broker):
    wire = Wire(broker.bootstrap)
    assert produce(wire, batch(b"v"), topic="nope").error_code == UNKNOWN_TOPIC


def test_idempotent_duplicate_is_acknowledged_once_and_gaps_are_refused(broker):
    wire = Wire(broker.bootstrap)
    first = batch(b"a", b"b", producer_id=42, producer_epoch=0, base_sequence=0)
    second = batch(b"c", producer_id=42, producer_epoch=0, base_sequence=2)
    assert produce(wire, first).base_offset == 0
    assert produce(wire, second).base_offset == 2
    retry = produce(wire, first)
    assert (retry.error_code, retry.base_offset) == (0, 0)
    assert log_end(broker) == 3
    gap = produce(wire, batch(b"d", producer_id=42, producer_epoch=0, base_sequence=7))
    assert gap.error_code == OUT_OF_ORDER_SEQUENCE
    assert log_end(broker) == 3


def _flip(data: bytes, position: int) -> bytearray:
    out = bytearray(data)
    out[position] ^= 0x01
    return out


def test_a_batch_larger_than_a_segment_is_refused_with_record_list_too_large(broker):
    # Kafka's Log.append: a batch that cannot fit in an empty segment is RECORD_LIST_TOO_LARGE.
    wire = Wire(broker.bootstrap)
    topic = CreateTopicsRequest.CreatableTopic
    wire.call(CreateTopicsRequest(topics=[topic(name="small", num_partitions=1, replication_factor=1, assignments=[],
                                               configs=[topic.CreatableTopicConfig(name="segment.bytes", value="200")])],
                                  timeout_ms=1000, validate_only=False), version=5)
    result = produce(wire, batch(b"x" * 1000), topic="small")
    assert result.error_code == 18  # RECORD_LIST_TOO_LARGE
    assert produce(wire, batch(b"fits"), topic="small").error_code == 0  # the connection is still usable
    wire.close()


def _framed(wire: Wire, request, version: int) -> tuple[int, bytes]:
    """A request framed as a client sends it, and its correlation id, for sending several at once."""
    correlation_id = wire.next_correlation_id()
    request.API_VERSION = version
    request.with_header(correlation_id=correlation_id, client_id=wire.client_id)
    return correlation_id, bytes(request.encode(header=True, framed=True))


def _produce_request(records: bytes) -> ProduceRequest:
    data = ProduceRequest.TopicProduceData
    return ProduceRequest(transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[
        data(name="t", partition_data=[data.PartitionProduceData(index=0, records=records)])])


def test_requests_sent_together_are_answered_together_in_order(broker):
    """Requests that arrive in one write are handled in one turn and their answers written
    together: every one comes back, in request order, each with its own offset."""
    wire = Wire(broker.bootstrap)
    sent = [_framed(wire, _produce_request(batch(b"v%d" % i)), 9) for i in range(8)]
    wire.send_raw(b"".join(frame for _, frame in sent))
    offsets = []
    for correlation_id, _ in sent:
        (topic,) = wire.receive(_produce_request(b""), 9, correlation_id).responses
        offsets.append(topic.partition_responses[0].base_offset)
    assert offsets == list(range(8))
    assert log_end(broker) == 8


def test_an_answer_does_not_wait_behind_a_long_polling_fetch(broker):
    """A Produce answer must not wait for the request read after it: here a fetch that long-polls
    for 60 s. The connection's read times out after 10 s, so a held answer fails the test."""
    wire = Wire(broker.bootstrap, timeout_s=10)
    produce_id, produce_frame = _framed(wire, _produce_request(batch(b"now")), 9)
    fetch = FetchRequest(replica_id=-1, max_wait_ms=60_000, min_bytes=1 << 20, max_bytes=1 << 20, isolation_level=0,
                         session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                         topics=[FetchRequest.FetchTopic(topic="t", partitions=[FetchRequest.FetchTopic.FetchPartition(
                             partition=0, fetch_offset=0, log_start_offset=-1, partition_max_bytes=1 << 20,
                             current_leader_epoch=-1)])])
    _, fetch_frame = _framed(wire, fetch, 11)
    wire.send_raw(produce_frame + fetch_frame)
    (topic,) = wire.receive(_produce_request(b""), 9, produce_id).responses
    assert (topic.partition_responses[0].error_code, topic.partition_responses[0].base_offset) == (0, 0)
    wire.close()


def test_answers_already_given_go_out_before_a_bad_frame_closes_the_connection(broker):
    wire = Wire(broker.bootstrap)
    produce_id, produce_frame = _framed(wire, _produce_request(batch(b"kept")), 9)
    wire.send_raw(produce_frame + struct.pack(">ihhi", 8, 9999, 0, 1))  # then an unknown API key
    (topic,) = wire.receive(_produce_request(b""), 9, produce_id).responses
    assert (topic.partition_responses[0].error_code, topic.partition_responses[0].base_offset) == (0, 0)
    assert wire.is_closed()
    assert log_end(broker) == 1
