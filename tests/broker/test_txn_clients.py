"""Transactions against unmodified clients: librdkafka (confluent-kafka) and kafka-python.

Transactional producers of one library, read_committed and read_uncommitted consumers of
the other (by assign(); groups are in test_group_clients.py), so what is visible is judged by
independent readers. Covers commit and abort, the last stable offset holding readers back,
fencing by a second producer with the same transactional.id, the transaction timeout,
a broker restart, and Kafka's error codes for bad transactional requests.
"""

from __future__ import annotations

import time
import uuid

import kafka.errors
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

import kcodecs

from broker_helpers import TIMEOUT_S, ShiftedClock, create_topic, read_kafka_python, transactional_producer, wait_for
from mirror.broker import EmbeddedBroker
from mirror.broker.transactions import TxnState
from mirror.kafka import KafkaConnection

pytestmark = pytest.mark.interop


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as running:
        yield running


def readable_end(broker: EmbeddedBroker, topic: str, partition: int, isolation: str) -> int:
    part = broker.state.topics.partition(topic, partition)
    return part.last_stable_offset if isolation == "read_committed" else part.log.log_end_offset


def consume_kafka_python(broker: EmbeddedBroker, topic: str, isolation: str, partitions: int = 2) -> list[bytes]:
    """Every value a kafka-python consumer returns until its position reaches the readable end."""
    ends = {p: readable_end(broker, topic, p, isolation) for p in range(partitions)}
    return read_kafka_python(broker.bootstrap, topic, isolation, partitions, ends)[0]


def consume_rdkafka(broker: EmbeddedBroker, topic: str, isolation: str, partitions: int = 2) -> list[bytes]:
    """The same with librdkafka, until each partition reports its end (librdkafka's position does not
    move over records it drops, so the end-of-partition event tells). It needs a group.id even
    with assign(); a fresh one, which commits nothing (no auto-commit), so offsets start at 0."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"unused-{uuid.uuid4()}",
                         "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    ends = {p: readable_end(broker, topic, p, isolation) for p in range(partitions)}
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while ends:
        assert time.monotonic() < deadline, "librdkafka consumer stalled"
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error() is None:
            values.append(message.value())
        elif message.error().code() == KafkaError._PARTITION_EOF and message.offset() >= ends.get(message.partition(), 0):
            ends.pop(message.partition(), None)
    consumer.close()
    return sorted(values)


def run_transactions_rdkafka(bootstrap: str, topic: str) -> None:
    producer = transactional_producer(bootstrap, "rd-" + topic)
    for prefix, commit in ((b"c", True), (b"a", False), (b"d", True)):
        producer.begin_transaction()
        for i in range(6):
            producer.produce(topic, value=prefix + b"%d" % i, partition=i % 2)
        if commit:
            producer.commit_transaction(TIMEOUT_S)
        else:
            producer.flush(TIMEOUT_S)
            producer.abort_transaction(TIMEOUT_S)


def run_transactions_kafka_python(bootstrap: str, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-" + topic)
    producer.init_transactions()
    for prefix, commit in ((b"c", True), (b"a", False), (b"d", True)):
        producer.begin_transaction()
        for i in range(6):
            producer.send(topic, value=prefix + b"%d" % i, partition=i % 2)
        if commit:
            producer.commit_transaction()
        else:
            producer.flush()
            producer.abort_transaction()
    producer.close()


PAIRS = {
    "librdkafka-to-kafka-python": (run_transactions_rdkafka, consume_kafka_python),
    "kafka-python-to-librdkafka": (run_transactions_kafka_python, consume_rdkafka),
}
COMMITTED = sorted(prefix + b"%d" % i for prefix in (b"c", b"d") for i in range(6))
ABORTED = sorted(b"a%d" % i for i in range(6))


@pytest.mark.parametrize("pair", PAIRS)
def test_committed_transactions_are_visible_and_aborted_ones_only_uncommitted(broker, pair):
    produce, consume = PAIRS[pair]
    create_topic(broker.bootstrap, pair, 2)
    produce(broker.bootstrap, pair)
    assert consume(broker, pair, "read_committed") == COMMITTED
    assert consume(broker, pair, "read_uncommitted") == sorted(COMMITTED + ABORTED)


def test_an_open_transaction_holds_read_committed_readers_at_its_start(broker):
    create_topic(broker.bootstrap, "open")
    producer = transactional_producer(broker.bootstrap, "holder")
    producer.begin_transaction()
    producer.produce("open", value=b"t0", partition=0)
    producer.commit_transaction(TIMEOUT_S)  # offsets 0, 1 (marker)
    producer.begin_transaction()
    producer.produce("open", value=b"pending", partition=0)
    producer.flush(TIMEOUT_S)  # offset 2, transaction still open
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce("open", value=b"after", partition=0)
    assert plain.flush(TIMEOUT_S) == 0  # offset 3, behind the open transaction

    tp = KTopicPartition("open", 0)
    committed = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, isolation_level="read_committed")
    uncommitted = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    assert committed.end_offsets([tp])[tp] == 2  # ListOffsets latest, read_committed: the LSO
    assert uncommitted.end_offsets([tp])[tp] == 4
    assert consume_kafka_python(broker, "open", "read_committed", partitions=1) == [b"t0"]
    assert consume_rdkafka(broker, "open", "read_uncommitted", partitions=1) == [b"after", b"pending", b"t0"]
    producer.commit_transaction(TIMEOUT_S)
    assert committed.end_offsets([tp])[tp] == 5
    assert consume_rdkafka(broker, "open", "read_committed", partitions=1) == [b"after", b"pending", b"t0"]
    committed.close()
    uncommitted.close()


def test_end_txn_is_answered_before_the_markers_are_written(broker, monkeypatch):
    """As Kafka's coordinator (issue 62): EndTxn answers once the decision is persisted, and the
    markers follow, so embedded figures pay what Kafka's do. librdkafka's commit succeeds and
    its records are then read_committed, each once."""
    create_topic(broker.bootstrap, "ordered")
    coordinator = broker.state.transactions
    events: list[str] = []
    end_txn, write_markers = coordinator.end_txn, coordinator._markers.write_markers

    def answered(*args, **kwargs):
        end_txn(*args, **kwargs)
        events.append("EndTxn answered")

    def markers(*args, **kwargs):
        events.append("markers written")
        return write_markers(*args, **kwargs)

    monkeypatch.setattr(coordinator, "end_txn", answered)
    monkeypatch.setattr(coordinator._markers, "write_markers", markers)
    producer = transactional_producer(broker.bootstrap, "ordered")
    for t in range(2):
        producer.begin_transaction()
        producer.produce("ordered", value=b"t%d" % t, partition=0)
        producer.commit_transaction(TIMEOUT_S)
    assert events == ["EndTxn answered", "markers written"] * 2
    assert consume_rdkafka(broker, "ordered", "read_committed", partitions=1) == [b"t0", b"t1"]


def test_a_second_librdkafka_producer_fences_the_first(broker):
    create_topic(broker.bootstrap, "fence", 2)
    first = transactional_producer(broker.bootstrap, "shared")
    first.begin_transaction()
    first.produce("fence", value=b"zombie", partition=0)
    first.flush(TIMEOUT_S)
    second = transactional_producer(broker.bootstrap, "shared")  # aborts the first one's transaction
    with pytest.raises(KafkaException) as fenced:
        first.commit_transaction(TIMEOUT_S)
    error = fenced.value.args[0]
    assert error.fatal() and error.code() == KafkaError._FENCED
    second.begin_transaction()
    second.produce("fence", value=b"live", partition=1)
    second.commit_transaction(TIMEOUT_S)
    assert consume_kafka_python(broker, "fence", "read_committed") == [b"live"]
    assert consume_kafka_python(broker, "fence", "read_uncommitted") == [b"live", b"zombie"]


def test_a_second_kafka_python_producer_fences_the_first(broker):
    create_topic(broker.bootstrap, "kfence", 2)
    first = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kshared")
    first.init_transactions()
    first.begin_transaction()
    first.send("kfence", value=b"zombie", partition=0)
    first.flush()
    second = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kshared")
    second.init_transactions()
    with pytest.raises(kafka.errors.ProducerFencedError):  # EndTxn v3 answers PRODUCER_FENCED
        first.commit_transaction()
    second.close()
    first.close(timeout=1)
    assert consume_rdkafka(broker, "kfence", "read_committed") == []


def test_an_abandoned_transaction_times_out_and_its_producer_is_fenced(tmp_path):
    clock = ShiftedClock()
    with EmbeddedBroker(tmp_path / "data", clock=clock, transaction_abort_interval_ms=20) as broker:
        create_topic(broker.bootstrap, "slow", 2)
        producer = transactional_producer(broker.bootstrap, "sleepy", **{"transaction.timeout.ms": 10_000})
        producer.begin_transaction()
        producer.produce("slow", value=b"late", partition=0)
        producer.flush(TIMEOUT_S)
        assert broker.state.transactions.get("sleepy").state is TxnState.ONGOING
        clock.offset_ms += 10_001  # the producer "went away" for longer than its transaction timeout
        wait_for(lambda: broker.state.transactions.get("sleepy").state is TxnState.COMPLETE_ABORT,
                 "the coordinator to abort the timed-out transaction")
        assert consume_kafka_python(broker, "slow", "read_committed") == []
        with pytest.raises(KafkaException) as fenced:
            producer.commit_transaction(TIMEOUT_S)
        assert fenced.value.args[0].fatal()


def test_coordinator_state_and_transactions_survive_a_restart(tmp_path):
    data = tmp_path / "data"
    with EmbeddedBroker(data) as broker:
        create_topic(broker.bootstrap, "durable", 2)
        producer = transactional_producer(broker.bootstrap, "restarting")
        producer.begin_transaction()
        producer.produce("durable", value=b"kept", partition=0)
        producer.commit_transaction(TIMEOUT_S)
        producer.begin_transaction()
        producer.produce("durable", value=b"orphan", partition=1)
        producer.flush(TIMEOUT_S)  # the broker stops with this transaction open
        state = broker.state.transactions.get("restarting")
    with EmbeddedBroker(data) as broker:
        assert broker.state.transactions.get("restarting") == state  # Ongoing, same epoch and partitions
        assert broker.state.topics.partition("durable", 1).last_stable_offset == 0
        assert consume_kafka_python(broker, "durable", "read_committed") == [b"kept"]
        successor = transactional_producer(broker.bootstrap, "restarting")  # aborts the orphan
        assert broker.state.transactions.get("restarting").producer_epoch == state.producer_epoch + 2
        assert consume_kafka_python(broker, "durable", "read_committed") == [b"kept"]
        assert consume_rdkafka(broker, "durable", "read_uncommitted") == [b"kept", b"orphan"]
        successor.begin_transaction()
        successor.produce("durable", value=b"next", partition=1)
        successor.commit_transaction(TIMEOUT_S)
        assert consume_kafka_python(broker, "durable", "read_committed") == [b"kept", b"next"]


def test_an_abort_by_librdkafka_lands_in_kafkas_txnindex_layout(broker, tmp_path):
    create_topic(broker.bootstrap, "indexed")
    producer = transactional_producer(broker.bootstrap, "indexer")
    producer.begin_transaction()
    for i in range(3):
        producer.produce("indexed", value=b"x%d" % i, partition=0)
    producer.flush(TIMEOUT_S)
    producer.abort_transaction(TIMEOUT_S)
    marker = broker.state.topics.partition("indexed", 0).log.log_end_offset - 1
    raw = (tmp_path / "data" / "indexed-0" / "00000000000000000000.txnindex").read_bytes()
    # Kafka's AbortedTxn: version int16 @0, producerId @2, firstOffset @10, lastOffset @18, lastStableOffset @26
    assert len(raw) == 34
    fields = [int.from_bytes(raw[at:at + size], "big", signed=True) for at, size in ((0, 2), (2, 8), (10, 8), (18, 8), (26, 8))]
    assert fields == [0, broker.state.transactions.get("indexer").producer_id, 0, marker, marker + 1]


# -- the wire, request by request ----------------------------------------------------------------

UNKNOWN_TOPIC, INVALID_REQUEST, INVALID_PRODUCER_EPOCH = 3, 42, 47
INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING, INVALID_TRANSACTION_TIMEOUT = 48, 49, 50
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, OPERATION_NOT_ATTEMPTED, PRODUCER_FENCED, TRANSACTION_ABORTABLE = 53, 55, 90, 120


@pytest.fixture
def wire(broker):
    create_topic(broker.bootstrap, "w")
    with KafkaConnection(broker.bootstrap) as connection:
        yield connection
        # Every refusal below is an answer: the same connection still serves requests.
        assert [t.name for t in connection.call(MetadataRequest(topics=None), version=9).topics] == ["w"]


def init(wire: KafkaConnection, transactional_id: str, timeout_ms: int = 60_000, version: int = 4):
    return wire.call(InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=timeout_ms,
                                           producer_id=-1, producer_epoch=-1), version=version)


def add_partitions(wire: KafkaConnection, transactional_id: str, producer_id: int, epoch: int,
                   partitions: list[tuple[str, int]], version: int = 3) -> dict[tuple[str, int], int]:
    topics: dict[str, list[int]] = {}
    for topic, index in partitions:
        topics.setdefault(topic, []).append(index)
    topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    response = wire.call(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[topic(name=name, partitions=indexes) for name, indexes in topics.items()],
    ), version=version)
    return {(t.name, p.partition_index): p.partition_error_code
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}


def end_txn(wire: KafkaConnection, transactional_id: str, producer_id: int, epoch: int, commit: bool,
            version: int = 3) -> int:
    return wire.call(EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch,
                                   committed=commit), version=version).error_code


def produce(wire: KafkaConnection, transactional_id: str | None, producer_id: int, epoch: int,
            version: int = 9, sequence: int = 0) -> int:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=producer_id,
                                        producer_epoch=epoch, base_sequence=sequence, batch_size=1 << 20)
    builder.append(0, timestamp=time.time_ns() // 1_000_000, key=None, value=b"v", headers=[])  # not retention's prey
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=1000, topic_data=[
        data(name="w", partition_data=[data.PartitionProduceData(index=0, records=bytes(builder.build()))])])
    (topic,) = wire.call(request, version=version).responses
    (partition,) = topic.partition_responses
    return partition.error_code


def test_api_versions_lists_the_transaction_apis(wire):
    """As Kafka 4.x with transaction.version 2 finalized: Produce v12 and EndTxn v5 offered."""
    response = wire.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), version=3)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert {key: ranges[key] for key in (0, 10, 22, 24, 25, 26)} == {
        0: (3, 12), 10: (0, 6), 22: (0, 4), 24: (0, 3), 25: (0, 3), 26: (0, 5)}
    assert [(f.name, f.min_version_level, f.max_version_level) for f in response.finalized_features] == [
        ("transaction.version", 2, 2)]


def test_a_broker_without_transactions_v2_offers_neither_produce_v12_nor_endtxn_v5(tmp_path):
    """As a Kafka 3.x broker (or a 4.x one with transaction.version 1): clients then add their
    partitions with AddPartitionsToTxn and keep their epoch."""
    with EmbeddedBroker(tmp_path / "v1", transaction_version=1) as v1, KafkaConnection(v1.bootstrap) as conn:
        response = conn.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), version=3)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert (ranges[0], ranges[26]) == ((3, 11), (0, 4))
    assert [(f.name, f.max_version_level) for f in response.finalized_features] == [("transaction.version", 1)]


def end_txn_v5(wire: KafkaConnection, transactional_id: str, producer_id: int, epoch: int, commit: bool = True):
    return wire.call(EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch,
                                   committed=commit), version=5)


def test_transactions_v2_a_first_batch_joins_the_transaction_and_its_end_bumps_the_epoch(broker, wire):
    """KIP-890 part 2 as Kafka's coordinator runs it: Produce v12's first transactional batch on
    a partition starts the transaction with no AddPartitionsToTxn (v11 is refused without it);
    EndTxn v5 answers the next transaction's epoch, the old epoch is fenced, the new one starts
    at sequence 0; an EndTxn retried with the old epoch (its answer lost) gets the same answer."""
    first = init(wire, "tv2")
    pid, epoch = first.producer_id, first.producer_epoch
    assert produce(wire, "tv2", pid, epoch, version=11) != 0  # not added: refused before v12
    assert produce(wire, "tv2", pid, epoch, version=12) == 0
    assert broker.state.transactions.get("tv2").state is TxnState.ONGOING
    ended = end_txn_v5(wire, "tv2", pid, epoch)
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (0, pid, epoch + 1)
    again = end_txn_v5(wire, "tv2", pid, epoch)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (0, pid, epoch + 1)
    assert produce(wire, "tv2", pid, epoch, version=12, sequence=1) == INVALID_PRODUCER_EPOCH  # fenced
    assert produce(wire, "tv2", pid, epoch + 1, version=12, sequence=0) == 0
    second = end_txn_v5(wire, "tv2", pid, epoch + 1, commit=False)
    assert (second.error_code, second.producer_id, second.producer_epoch) == (0, pid, epoch + 2)


def test_transactions_v2_past_the_last_epoch_a_new_producer_id_follows(broker, wire):
    """Kafka's epoch is a short and its last value is kept for fencing: the end of a
    transaction in the last epoch but one writes its markers in the last and names a new
    producer id at epoch 0 for the next (the coordinator's ``nextProducerId``)."""
    import dataclasses

    first = init(wire, "worn")
    coordinator = broker.state.transactions
    worn = dataclasses.replace(coordinator.get("worn"), producer_epoch=32766)
    coordinator._txns["worn"] = worn  # as after 32,766 transactions
    pid = first.producer_id
    assert produce(wire, "worn", pid, 32766, version=12) == 0
    ended = end_txn_v5(wire, "worn", pid, 32766)
    assert ended.error_code == 0 and ended.producer_id != pid and ended.producer_epoch == 0
    assert produce(wire, "worn", ended.producer_id, 0, version=12) == 0
    assert end_txn_v5(wire, "worn", ended.producer_id, 0).error_code == 0


def test_find_coordinator_names_this_broker_for_transactions(broker, wire):
    host, port = broker.bootstrap.split(":")
    old = wire.call(FindCoordinatorRequest(key="any-id", key_type=1), version=3)
    assert (old.error_code, old.node_id, old.host, old.port) == (0, 0, host, int(port))
    new = wire.call(FindCoordinatorRequest(key_type=1, coordinator_keys=["a", "b"]), version=4)
    assert [(c.key, c.error_code, c.node_id, c.port) for c in new.coordinators] == [("a", 0, 0, int(port)), ("b", 0, 0, int(port))]
    share = wire.call(FindCoordinatorRequest(key_type=2, coordinator_keys=["s"]), version=6)
    assert share.coordinators[0].error_code == INVALID_REQUEST


def test_init_producer_id_refusals(wire):
    assert init(wire, "").error_code == INVALID_REQUEST
    assert init(wire, "x", timeout_ms=0).error_code == INVALID_TRANSACTION_TIMEOUT
    assert init(wire, "x", timeout_ms=15 * 60 * 1000 + 1).error_code == INVALID_TRANSACTION_TIMEOUT
    first = init(wire, "x")
    assert (first.error_code, first.producer_epoch) == (0, 0)
    stale = wire.call(InitProducerIdRequest(transactional_id="x", transaction_timeout_ms=60_000,
                                            producer_id=first.producer_id + 1, producer_epoch=0), version=4)
    assert stale.error_code == PRODUCER_FENCED
    stale_v3 = wire.call(InitProducerIdRequest(transactional_id="x", transaction_timeout_ms=60_000,
                                               producer_id=first.producer_id + 1, producer_epoch=0), version=3)
    assert stale_v3.error_code == INVALID_PRODUCER_EPOCH  # PRODUCER_FENCED is v4+
    bumped = init(wire, "x", version=0)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, first.producer_id, 1)
    half = wire.call(InitProducerIdRequest(transactional_id="x", transaction_timeout_ms=60_000,
                                           producer_id=first.producer_id, producer_epoch=-1), version=3)
    assert half.error_code == INVALID_REQUEST


def test_unknown_ids_and_wrong_epochs_get_kafkas_codes(wire):
    assert end_txn(wire, "nobody", 1, 0, True) == INVALID_PRODUCER_ID_MAPPING
    assert add_partitions(wire, "nobody", 1, 0, [("w", 0)]) == {("w", 0): INVALID_PRODUCER_ID_MAPPING}
    pid = init(wire, "y").producer_id
    init(wire, "y")  # epoch 1: epoch 0 is fenced
    assert add_partitions(wire, "y", pid, 0, [("w", 0)], version=1) == {("w", 0): INVALID_PRODUCER_EPOCH}
    assert add_partitions(wire, "y", pid, 0, [("w", 0)], version=2) == {("w", 0): PRODUCER_FENCED}
    assert end_txn(wire, "y", pid, 0, True, version=1) == INVALID_PRODUCER_EPOCH
    assert end_txn(wire, "y", pid, 0, True, version=2) == PRODUCER_FENCED
    assert end_txn(wire, "y", pid, 1, True) == INVALID_TXN_STATE  # nothing to commit
    assert add_partitions(wire, "y", pid, 1, [("w", 0), ("w", 5), ("nope", 0)]) == {
        ("w", 0): OPERATION_NOT_ATTEMPTED, ("w", 5): UNKNOWN_TOPIC, ("nope", 0): UNKNOWN_TOPIC}
    assert wire.call(AddOffsetsToTxnRequest(transactional_id="y", producer_id=pid, producer_epoch=0, group_id="g"),
                     version=1).error_code == INVALID_PRODUCER_EPOCH
    assert wire.call(AddOffsetsToTxnRequest(transactional_id="y", producer_id=pid, producer_epoch=0, group_id="g"),
                     version=3).error_code == PRODUCER_FENCED


def test_transactional_produce_is_verified_with_the_coordinator(broker, wire):
    pid = init(wire, "z").producer_id
    assert produce(wire, None, pid, 0) == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert produce(wire, "z", pid, 0) == INVALID_TXN_STATE  # AddPartitionsToTxn not done
    assert produce(wire, "z", pid, 0, version=11) == TRANSACTION_ABORTABLE
    assert produce(wire, "z", pid + 7, 0) == INVALID_PRODUCER_ID_MAPPING
    assert produce(wire, "z", pid, 3) == INVALID_PRODUCER_EPOCH
    assert add_partitions(wire, "z", pid, 0, [("w", 0)]) == {("w", 0): 0}
    assert produce(wire, "z", pid, 0) == 0
    assert broker.state.topics.partition("w", 0).last_stable_offset == 0
    assert end_txn(wire, "z", pid, 0, False) == 0
    assert end_txn(wire, "z", pid, 0, False) == 0  # a retry after success
    assert end_txn(wire, "z", pid, 0, True) == INVALID_TXN_STATE
    assert broker.state.topics.partition("w", 0).last_stable_offset == 2
    assert produce(wire, "z", pid, 0) == INVALID_TXN_STATE  # the transaction is over
    latest = wire.call(ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name="w", partitions=[
            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-1,
                                                                     current_leader_epoch=-1)])]), version=5)
    assert latest.topics[0].partitions[0].offset == 2


def test_a_transaction_is_verified_once_per_partition_as_kafka_does(broker, wire, monkeypatch):
    """Kafka asks the coordinator only while the partition has no transaction of the producer
    open at that epoch (``hasOngoingTransaction``); the request still needs its transactional id."""
    asked = []
    verify = broker.state.transactions.verify
    monkeypatch.setattr(broker.state.transactions, "verify", lambda *args: (asked.append(args[3]), verify(*args))[1])
    pid = init(wire, "once").producer_id
    add_partitions(wire, "once", pid, 0, [("w", 0)])
    assert produce(wire, "once", pid, 0, sequence=0) == 0
    assert produce(wire, "once", pid, 0, sequence=1) == 0
    assert asked == [("w", 0)]
    assert produce(wire, None, pid, 0, sequence=2) == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert end_txn(wire, "once", pid, 0, True) == 0
    assert produce(wire, "once", pid, 0, sequence=2) == INVALID_TXN_STATE  # closed: asked again, and refused
    add_partitions(wire, "once", pid, 0, [("w", 0)])
    assert produce(wire, "once", pid, 0, sequence=2) == 0
    assert asked == [("w", 0)] * 3


def fetch(wire: KafkaConnection, isolation: int, offset: int = 0):
    partition = FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=offset, log_start_offset=-1,
                                                       partition_max_bytes=1 << 20, current_leader_epoch=-1)
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=isolation,
                           session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                           topics=[FetchRequest.FetchTopic(topic="w", partitions=[partition])])
    (topic,) = wire.call(request, version=11).responses
    (part,) = topic.partitions
    assert part.error_code == 0
    aborted = None if part.aborted_transactions is None else [(a.producer_id, a.first_offset)
                                                               for a in part.aborted_transactions]
    offsets = [batch.base_offset for batch in kcodecs.iter_batches(part.records or b"")]
    return part.high_watermark, part.last_stable_offset, aborted, offsets


def test_fetch_reports_the_lso_and_read_committed_lists_aborts_and_stops_at_it(wire):
    pid = init(wire, "f").producer_id
    add_partitions(wire, "f", pid, 0, [("w", 0)])
    assert produce(wire, "f", pid, 0) == 0  # offset 0
    assert end_txn(wire, "f", pid, 0, False) == 0  # ABORT marker at 1
    assert fetch(wire, 1) == (2, 2, [(pid, 0)], [0, 1])
    assert fetch(wire, 1, offset=1) == (2, 2, [(pid, 0)], [1])  # the marker still closes that abort
    assert fetch(wire, 1, offset=2) == (2, 2, [], [])
    assert fetch(wire, 0) == (2, 2, None, [0, 1])
    add_partitions(wire, "f", pid, 0, [("w", 0)])
    assert produce(wire, "f", pid, 0, sequence=1) == 0  # offset 2, left open
    assert fetch(wire, 1) == (3, 2, [(pid, 0)], [0, 1])  # nothing from the LSO on
    assert fetch(wire, 0) == (3, 2, None, [0, 1, 2])  # everything, and still the real LSO


@pytest.mark.parametrize("coordinator_error, version, produce_error", [
    (kafka.errors.ProducerFencedError, 9, INVALID_PRODUCER_EPOCH),   # what librdkafka takes as "fenced"
    (kafka.errors.ProducerFencedError, 11, INVALID_PRODUCER_EPOCH),
    (kafka.errors.ConcurrentTransactionsError, 9, 19),               # NOT_ENOUGH_REPLICAS: retriable for old clients
    (kafka.errors.CoordinatorNotAvailableError, 11, 19),
    (kafka.errors.InvalidTxnStateError, 10, INVALID_TXN_STATE),
    (kafka.errors.InvalidTxnStateError, 11, TRANSACTION_ABORTABLE),
    (kafka.errors.InvalidProducerIdMappingError, 11, INVALID_PRODUCER_ID_MAPPING),
])
def test_verification_errors_as_kafkas_produce_path_reports_them(coordinator_error, version, produce_error):
    from mirror.broker.errors import ApiError
    from mirror.broker.handlers.produce import _as_produce_error

    assert _as_produce_error(ApiError(coordinator_error, "x"), version).code == produce_error


def test_kmirrors_producer_runs_transactions_v2_on_the_embedded_broker(broker):
    """kmirror's client learns the finalized feature from ApiVersions: its partitions join by
    their first batch (Produce v12) and each commit's EndTxn v5 moves the coordinator's epoch
    on by one, as the coordinator's own state shows."""
    from mirror.kafka import KafkaClient
    from mirror.kafka import TopicPartition as Tp
    from mirror.kafka.transactional_producer import TransactionalProducer

    create_topic(broker.bootstrap, "v2")
    with KafkaClient(broker.bootstrap) as client:
        producer = TransactionalProducer(client, "kmirror-v2")
        try:
            assert producer.implicit_partitions
            epochs = [broker.state.transactions.get("kmirror-v2").producer_epoch]
            for _ in range(3):
                producer.enqueue(Tp("v2", 0), bytearray(kcodecs.build_batch([kcodecs.Record(value=b"v", timestamp=1)])),
                                 1, None)
                producer.commit()
                meta = broker.state.transactions.get("kmirror-v2")
                assert meta.state is TxnState.COMPLETE_COMMIT
                epochs.append(meta.producer_epoch)
        finally:
            producer.close()
    assert epochs == [epochs[0] + n for n in range(4)]
