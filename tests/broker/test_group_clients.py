"""Consumer groups against unmodified clients: librdkafka (confluent-kafka) and kafka-python.

Groups of several members that subscribe, rebalance as members join and leave and commit
synchronously, judged by what they read: every record once, none lost, none twice. Also
committed offsets across a broker restart, assign()-and-commit consumers (simple groups),
the admin APIs through kafka-python's KafkaAdminClient, and offsets committed in a
transaction (``send_offsets_to_transaction``) that are visible only once it commits.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import CommitFailedError
from kafka.structs import OffsetAndMetadata

from broker_helpers import create_topic, wait_for
from mirror.broker import EmbeddedBroker
from mirror.broker.groups import GroupConfig

pytestmark = pytest.mark.interop

TIMEOUT_S = 60
QUICK = GroupConfig(initial_rebalance_delay_ms=0)


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data", groups=QUICK) as running:
        yield running


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % partitions)
    assert producer.flush(TIMEOUT_S) == 0


class Member(threading.Thread):
    """One consumer of the group in its own thread: poll, commit synchronously, then note what was
    read. A commit the group refuses (the member was already rebalanced out) leaves its records
    unread: the next owner of the partition reads them from the committed offset. So a record
    noted twice means a commit the broker should have refused, one never noted a lost commit."""

    def __init__(self, name: str, consumer, poll, seen: list, lock: threading.Lock):
        super().__init__(name=name, daemon=True)
        self.consumer, self._poll, self.seen, self._lock = consumer, poll, seen, lock
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for partition, offset, value in self._poll(self.consumer):
                    with self._lock:
                        self.seen.append((self.name, partition, offset, value))
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc
        finally:
            self.consumer.close()


def rdkafka_member(bootstrap: str, group: str, topic: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 10_000, "heartbeat.interval.ms": 500})
    consumer.subscribe([topic])
    return consumer


def rdkafka_poll(consumer: Consumer):
    message = consumer.poll(0.1)
    if message is None or message.error():
        return []
    try:
        consumer.commit(message=message, asynchronous=False)  # the next offset
    except KafkaException:
        return []
    return [(message.partition(), message.offset(), message.value())]


def kafka_python_member(bootstrap: str, group: str, topic: str) -> KafkaConsumer:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=10_000, heartbeat_interval_ms=500,
                             fetch_max_wait_ms=100)
    # The topic's metadata first: a leader that joins before it has it assigns nothing, and
    # kafka-python may miss the metadata update that should make it rejoin.
    assert consumer.partitions_for_topic(topic)
    consumer.subscribe([topic])
    return consumer


def kafka_python_poll(consumer: KafkaConsumer):
    read = []
    for tp, records in consumer.poll(timeout_ms=100, max_records=5).items():
        try:
            consumer.commit({tp: OffsetAndMetadata(records[-1].offset + 1, "", -1)})
        except CommitFailedError:
            continue
        read += [(tp.partition, record.offset, record.value) for record in records]
    return read


CLIENTS = {"librdkafka": (rdkafka_member, rdkafka_poll), "kafka-python": (kafka_python_member, kafka_python_poll)}


def run_group(broker: EmbeddedBroker, kinds: list[str], topic: str, group: str) -> list[tuple]:
    """Members join one by one while records keep coming, then the first two leave; what they all read."""
    partitions = 6
    create_topic(broker.bootstrap, topic, partitions)
    seen: list[tuple] = []
    lock = threading.Lock()
    members: list[Member] = []
    expected = 0

    def add(kind: str) -> None:
        make, poll = CLIENTS[kind]
        member = Member(f"{kind}-{len(members)}", make(broker.bootstrap, group, topic), poll, seen, lock)
        members.append(member)
        member.start()

    def produce_batch() -> None:
        nonlocal expected
        produce(broker.bootstrap, topic, [b"%d" % i for i in range(expected, expected + 60)], partitions)
        expected += 60
        wait_for(lambda: len(seen) >= expected or any(m.error for m in members), f"{expected} records read",
                 timeout_s=TIMEOUT_S)

    for kind in kinds:
        add(kind)
        produce_batch()  # read by whoever holds the partitions now, across the rebalance
    wait_for(lambda: len(broker.state.groups.describe(group).members) == len(kinds), "every member joined", timeout_s=TIMEOUT_S)
    for member in members[:2]:
        member.stop.set()
        member.join(TIMEOUT_S)
        produce_batch()
    for member in members[2:]:
        member.stop.set()
        member.join(TIMEOUT_S)
    assert [m.error for m in members] == [None] * len(members)
    assert sorted(int(value) for _, _, _, value in seen) == list(range(expected)), "a record lost or read twice"
    return seen


@pytest.mark.parametrize("kinds", [["librdkafka"] * 3, ["kafka-python"] * 3, ["librdkafka", "kafka-python"] * 2],
                         ids=["librdkafka", "kafka-python", "mixed"])
def test_a_group_reads_every_record_once_across_rebalances(broker, kinds):
    seen = run_group(broker, kinds, "events", "readers")
    readers = {name for name, _, _, _ in seen}
    assert len(readers) > 1, "the partitions were never shared"
    committed = broker.state.groups.committed_offsets("readers")
    ends = {p: broker.state.topics.partition("events", p).log.log_end_offset for p in range(6)}
    assert {p: committed[("events", p)].offset for p in range(6)} == ends
    assert broker.state.groups.describe("readers").state == "Empty"  # everyone left


def test_committed_offsets_survive_a_restart(tmp_path):
    data = tmp_path / "data"
    with EmbeddedBroker(data, groups=QUICK) as broker:
        create_topic(broker.bootstrap, "kept", 2)
        produce(broker.bootstrap, "kept", [b"%d" % i for i in range(20)], 2)
        consumer = rdkafka_member(broker.bootstrap, "resumer", "kept")
        read = []
        while len(read) < 8:
            read += rdkafka_poll(consumer)
        consumer.close()
    with EmbeddedBroker(data, groups=QUICK) as broker:
        read_per_partition = {("kept", p): sum(1 for partition, _, _ in read if partition == p) for p in (0, 1)}
        assert {tp: o.offset for tp, o in broker.state.groups.committed_offsets("resumer").items()} == {
            tp: count for tp, count in read_per_partition.items() if count}
        consumer = kafka_python_member(broker.bootstrap, "resumer", "kept")
        rest = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(read) + len(rest) < 20:
            assert time.monotonic() < deadline
            rest += kafka_python_poll(consumer)
        consumer.close()
    assert sorted(int(v) for _, _, v in read + rest) == list(range(20))


def test_assign_and_commit_without_group_membership(broker):
    create_topic(broker.bootstrap, "manual", 2)
    rd = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "by-hand", "enable.auto.commit": False})
    rd.assign([CTopicPartition("manual", 0, 0)])
    rd.commit(offsets=[CTopicPartition("manual", 0, 17, metadata="rd-meta")], asynchronous=False)
    (committed,) = rd.committed([CTopicPartition("manual", 0)], timeout=TIMEOUT_S)
    assert (committed.offset, committed.metadata) == (17, "rd-meta")
    rd.close()

    kp = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="by-hand", enable_auto_commit=False)
    tp = KTopicPartition("manual", 1)
    kp.assign([tp])
    kp.commit({tp: OffsetAndMetadata(5, "kp-meta", -1)})
    assert kp.committed(tp, metadata=True).metadata == "kp-meta"
    assert kp.committed(KTopicPartition("manual", 0)) == 17  # what librdkafka committed for the same group
    kp.close()
    description = broker.state.groups.describe("by-hand")
    assert (description.state, description.protocol_type, description.members) == ("Empty", "", ())


def test_admin_lists_describes_and_deletes_groups(broker):
    create_topic(broker.bootstrap, "watched", 3)
    produce(broker.bootstrap, "watched", [b"x"] * 9, 3)
    consumer = rdkafka_member(broker.bootstrap, "watchers", "watched")
    read = []
    while len(read) < 9:
        read += rdkafka_poll(consumer)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        admin.alter_group_offsets("admin-set", {KTopicPartition("watched", 0): OffsetAndMetadata(2, "set", -1)})
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert (listed["watchers"]["protocol_type"], listed["watchers"]["group_state"]) == ("consumer", "Stable")
        assert (listed["admin-set"]["protocol_type"], listed["admin-set"]["group_state"]) == ("", "Empty")
        assert [g["group_id"] for g in admin.list_groups(states_filter=["Stable"])] == ["watchers"]

        (described,) = admin.describe_groups(["watchers"]).values()
        assert (described["group_state"], described["protocol_type"], described["protocol_data"]) == (
            "Stable", "consumer", "range")
        (member,) = described["members"]
        assert member["client_host"] == "/127.0.0.1"
        assert sorted(p for t in member["member_assignment"]["assigned_partitions"] for p in t["partitions"]) == [0, 1, 2]

        offsets = admin.list_group_offsets({"watchers": None, "admin-set": None})
        assert {tp.partition: o.offset for tp, o in offsets["watchers"].items()} == {0: 3, 1: 3, 2: 3}
        assert offsets["admin-set"][KTopicPartition("watched", 0)].metadata == "set"

        assert admin.delete_groups(["watchers"]) == {"watchers": "NonEmptyGroupError"}
        consumer.close()
        assert admin.delete_groups(["watchers", "admin-set"]) == {"watchers": "OK", "admin-set": "OK"}
        assert admin.list_groups() == []
        assert admin.delete_groups(["watchers"]) == {"watchers": "GroupIdNotFoundError"}
    finally:
        admin.close()
    assert broker.state.groups.committed_offsets("watchers") == {}


# -- offsets in transactions ---------------------------------------------------------------------

def committed_of(broker: EmbeddedBroker, group: str) -> dict[int, int]:
    return {partition: o.offset for (_, partition), o in broker.state.groups.committed_offsets(group).items()}


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_librdkafka_sends_offsets_to_its_transaction(broker, commit):
    """consume-transform-produce: the output and the input offsets commit, or abort, together."""
    create_topic(broker.bootstrap, "in", 2)
    create_topic(broker.bootstrap, "out", 1)
    produce(broker.bootstrap, "in", [b"%d" % i for i in range(10)], 2)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "transformers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["in"])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "transformer", "linger.ms": 5})
    producer.init_transactions(TIMEOUT_S)
    consumed = []
    while len(consumed) < 10:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            consumed.append(message)
    producer.begin_transaction()
    for message in consumed:
        producer.produce("out", value=message.value() + b"!")
    producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                         consumer.consumer_group_metadata(), TIMEOUT_S)
    producer.flush(TIMEOUT_S)
    assert committed_of(broker, "transformers") == {}  # pending in the transaction
    if commit:
        producer.commit_transaction(TIMEOUT_S)
        assert committed_of(broker, "transformers") == {0: 5, 1: 5}
    else:
        producer.abort_transaction(TIMEOUT_S)
        assert committed_of(broker, "transformers") == {}
    (mine,) = consumer.committed([CTopicPartition("in", 0)], timeout=TIMEOUT_S)
    assert mine.offset == (5 if commit else -1001)  # librdkafka's OFFSET_INVALID: nothing committed
    consumer.close()


def test_kafka_python_sends_offsets_to_its_transaction(broker):
    create_topic(broker.bootstrap, "in", 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-transformer")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("in", b"x")
    producer.send_offsets_to_transaction({KTopicPartition("in", 0): OffsetAndMetadata(1, "via txn", -1)}, "kp-group")
    assert committed_of(broker, "kp-group") == {}
    producer.commit_transaction()
    assert broker.state.groups.committed_offsets("kp-group")[("in", 0)].metadata == "via txn"
    producer.begin_transaction()
    producer.send_offsets_to_transaction({KTopicPartition("in", 0): OffsetAndMetadata(7, "", -1)}, "kp-group")
    producer.abort_transaction()
    assert committed_of(broker, "kp-group") == {0: 1}
    producer.close()


def test_an_open_transaction_holds_back_stable_offsets_only(broker):
    """A read_committed librdkafka consumer asks for stable offsets (KIP-447): it waits while
    the group's offsets are pending, then gets the committed ones; plain reads do not wait."""
    create_topic(broker.bootstrap, "in", 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="holder")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send_offsets_to_transaction({KTopicPartition("in", 0): OffsetAndMetadata(3, "", -1)}, "held")
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "held", "isolation.level": "read_committed"})
    with pytest.raises(KafkaException):
        reader.committed([CTopicPartition("in", 0)], timeout=2)  # UNSTABLE_OFFSET_COMMIT until the timeout
    plain = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="held")
    assert plain.committed(KTopicPartition("in", 0)) is None  # kafka-python does not ask for stable offsets
    plain.close()
    producer.commit_transaction()
    (tp,) = reader.committed([CTopicPartition("in", 0)], timeout=TIMEOUT_S)
    assert tp.offset == 3
    reader.close()
    producer.close()
