"""The group APIs on the wire, request by request: every served version encodes and decodes,
refusals carry Kafka's error codes on a connection that stays open, and a member that stops
heartbeating is evicted (the broker's Clock moved, not waited for) while a librdkafka member
of the same group carries on.
"""

from __future__ import annotations

import select
import time

import pytest
from confluent_kafka import Consumer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import AddOffsetsToTxnRequest, InitProducerIdRequest, TxnOffsetCommitRequest

from broker_helpers import ShiftedClock
from mirror.broker import EmbeddedBroker
from mirror.broker.groups import GroupConfig
from mirror.kafka import KafkaConnection

pytestmark = pytest.mark.interop

UNKNOWN_TOPIC, OFFSET_METADATA_TOO_LARGE, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL = 3, 12, 22, 23
INVALID_GROUP_ID, UNKNOWN_MEMBER_ID, INVALID_SESSION_TIMEOUT, REBALANCE_IN_PROGRESS = 24, 25, 26, 27
INVALID_REQUEST, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING = 42, 47, 48, 49
NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, MEMBER_ID_REQUIRED = 68, 69, 79
SUBSCRIPTION = bytes(ConsumerProtocolSubscription(topics=["w"], user_data=None).encode(version=0))


@pytest.fixture
def clock() -> ShiftedClock:
    return ShiftedClock()


@pytest.fixture
def broker(tmp_path, clock):
    with EmbeddedBroker(tmp_path / "data", clock=clock, groups=GroupConfig(initial_rebalance_delay_ms=0)) as running:
        admin = KafkaAdminClient(bootstrap_servers=running.bootstrap, request_timeout_ms=10_000)
        admin.create_topics([NewTopic("w", 2, 1)])
        admin.close()
        yield running


@pytest.fixture
def wire(broker):
    with KafkaConnection(broker.bootstrap, client_id="wire") as connection:
        yield connection
        # Every refusal below is an answer: the same connection still serves requests.
        assert [t.name for t in connection.call(MetadataRequest(topics=None), version=9).topics] == ["w"]


def join_request(group: str, member_id: str = "", session_ms: int = 10_000, protocols=None) -> JoinGroupRequest:
    protocols = [("range", SUBSCRIPTION)] if protocols is None else protocols
    return JoinGroupRequest(group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=30_000,
                            member_id=member_id, group_instance_id=None, protocol_type="consumer",
                            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=name, metadata=metadata)
                                       for name, metadata in protocols], reason="a test")


def join(wire: KafkaConnection, group: str, version: int, **options):
    """A member joined alone (the second round of KIP-394 from v4); the JoinGroup answer."""
    response = wire.call(join_request(group, **options), version=version)
    if version >= 4:
        assert response.error_code == MEMBER_ID_REQUIRED
        response = wire.call(join_request(group, member_id=response.member_id, **options), version=version)
    assert response.error_code == 0
    return response


def sync(wire: KafkaConnection, group: str, generation: int, member_id: str, version: int,
         assignments: dict[str, bytes] | None = None, protocol: tuple | None = ("consumer", "range")):
    protocol_type, protocol_name = protocol or (None, None)
    return wire.call(SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None,
        protocol_type=protocol_type, protocol_name=protocol_name,
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                     for m, a in (assignments or {}).items()]), version=version)


def heartbeat(wire: KafkaConnection, group: str, generation: int, member_id: str, version: int = 4) -> int:
    return wire.call(HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                                      group_instance_id=None), version=version).error_code


def commit(wire: KafkaConnection, group: str, version: int, offsets: dict[tuple[str, int], tuple[int, str | None]],
           generation: int = -1, member_id: str = "") -> dict[tuple[str, int], int]:
    topic = OffsetCommitRequest.OffsetCommitRequestTopic
    topics: dict[str, list] = {}
    for (name, index), (offset, metadata) in offsets.items():
        topics.setdefault(name, []).append(topic.OffsetCommitRequestPartition(
            partition_index=index, committed_offset=offset, committed_leader_epoch=7, committed_metadata=metadata))
    response = wire.call(OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation,
                                             member_id=member_id, group_instance_id=None, retention_time_ms=-1,
                                             topics=[topic(name=n, partitions=p) for n, p in topics.items()]),
                         version=version)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def fetch(wire: KafkaConnection, group: str, version: int, partitions: list[int] | None = (0, 1),
          require_stable: bool = False) -> dict:
    """``{partition: (offset, leader_epoch, metadata, error)}``, in any version's shape."""
    if version >= 8:
        group_class = OffsetFetchRequest.OffsetFetchRequestGroup
        topics = None if partitions is None else [group_class.OffsetFetchRequestTopics(name="w", partition_indexes=list(partitions))]
        response = wire.call(OffsetFetchRequest(groups=[group_class(group_id=group, member_id=None, member_epoch=-1,
                                                                    topics=topics)], require_stable=require_stable),
                             version=version)
        (answer,) = response.groups
        assert answer.error_code == 0
        topics_out = answer.topics
    else:
        topics = None if partitions is None else [OffsetFetchRequest.OffsetFetchRequestTopic(
            name="w", partition_indexes=list(partitions))]
        response = wire.call(OffsetFetchRequest(group_id=group, topics=topics, require_stable=require_stable),
                             version=version)
        assert version < 2 or response.error_code == 0
        topics_out = response.topics
    return {p.partition_index: (p.committed_offset, p.committed_leader_epoch if version >= 5 else -1, p.metadata,
                                p.error_code)
            for t in topics_out for p in t.partitions}


def describe(wire: KafkaConnection, group: str, version: int = 6):
    (described,) = wire.call(DescribeGroupsRequest(groups=[group], include_authorized_operations=True),
                             version=version).groups
    return described


# -- every version -------------------------------------------------------------------------------

def test_api_versions_lists_the_group_apis(wire):
    response = wire.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), version=3)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert {key: ranges[key] for key in (8, 9, 11, 12, 13, 14, 15, 16, 25, 28, 42)} == {
        8: (2, 9), 9: (1, 9), 11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5),
        25: (0, 3), 28: (0, 3), 42: (0, 2)}


def test_find_coordinator_names_this_broker_for_groups(broker, wire):
    host, port = broker.bootstrap.split(":")
    for version in (0, 3):
        old = wire.call(FindCoordinatorRequest(key="any-group", key_type=0), version=version)
        assert (old.error_code, old.node_id, old.host, old.port) == (0, 0, host, int(port))
    new = wire.call(FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]), version=4)
    assert [(c.key, c.error_code, c.node_id, c.port) for c in new.coordinators] == [("a", 0, 0, int(port)), ("b", 0, 0, int(port))]
    share = wire.call(FindCoordinatorRequest(key_type=2, coordinator_keys=["s"]), version=6)
    assert share.coordinators[0].error_code == INVALID_REQUEST


@pytest.mark.parametrize("version", range(10))
def test_membership_in_every_version(wire, version):
    """JoinGroup v``version``; SyncGroup, Heartbeat, LeaveGroup, DescribeGroups and ListGroups at
    the same version where they have it, else their newest."""
    group = f"g{version}"
    joined = join(wire, group, version)
    assert (joined.generation_id, joined.leader, joined.protocol_name) == (1, joined.member_id, "range")
    assert joined.protocol_type == ("consumer" if version >= 7 else None)
    assert [(m.member_id, bytes(m.metadata)) for m in joined.members] == [(joined.member_id, SUBSCRIPTION)]
    assignment = bytes(ConsumerProtocolAssignment(assigned_partitions=[("w", [0, 1])], user_data=None).encode(version=0))
    synced = sync(wire, group, 1, joined.member_id, min(version, 5), {joined.member_id: assignment})
    assert (synced.error_code, bytes(synced.assignment)) == (0, assignment)
    assert heartbeat(wire, group, 1, joined.member_id, min(version, 4)) == 0
    described = describe(wire, group, min(version, 6))
    assert (described.group_state, described.protocol_data, [m.member_id for m in described.members]) == (
        "Stable", "range", [joined.member_id])
    assert [m.client_id for m in described.members] == ["wire"]
    listed = wire.call(ListGroupsRequest(states_filter=[], types_filter=[]), version=min(version, 5)).groups
    assert [(g.group_id, g.protocol_type) for g in listed] == [(group, "consumer")]
    leave_version = min(version, 5)
    leave = LeaveGroupRequest(group_id=group, member_id=joined.member_id, members=[
        LeaveGroupRequest.MemberIdentity(member_id=joined.member_id, group_instance_id=None, reason="done")])
    left = wire.call(leave, version=leave_version)
    assert left.error_code == 0 and (leave_version < 3 or [m.error_code for m in left.members] == [0])
    assert describe(wire, group).group_state == "Empty"
    deleted = wire.call(DeleteGroupsRequest(groups_names=[group]), version=min(version, 2)).results
    assert [(r.group_id, r.error_code) for r in deleted] == [(group, 0)]


@pytest.mark.parametrize("commit_version", range(2, 10))
def test_offsets_in_every_version(wire, commit_version):
    group = f"o{commit_version}"
    assert commit(wire, group, commit_version, {("w", 0): (5, "five"), ("w", 1): (6, None)}) == {("w", 0): 0, ("w", 1): 0}
    epoch = 7 if commit_version >= 6 else -1
    for fetch_version in range(1, 10):
        assert fetch(wire, group, fetch_version) == {0: (5, epoch if fetch_version >= 5 else -1, "five", 0),
                                                     1: (6, epoch if fetch_version >= 5 else -1, "", 0)}
        if fetch_version >= 2:
            assert set(fetch(wire, group, fetch_version, partitions=None)) == {0, 1}
    assert fetch(wire, "nobody", 9) == {0: (-1, -1, "", 0), 1: (-1, -1, "", 0)}


# -- refusals ------------------------------------------------------------------------------------

def test_membership_refusals(wire):
    assert wire.call(join_request("g", session_ms=5_000), version=7).error_code == INVALID_SESSION_TIMEOUT
    assert wire.call(join_request(""), version=7).error_code == INVALID_GROUP_ID
    assert wire.call(join_request("g", protocols=[]), version=7).error_code == INCONSISTENT_GROUP_PROTOCOL
    assert wire.call(join_request("g", member_id="ghost"), version=7).error_code == UNKNOWN_MEMBER_ID
    joined = join(wire, "g", 7)
    member = joined.member_id
    other_type = JoinGroupRequest(group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=30_000, member_id="",
                                  group_instance_id=None, protocol_type="connect",
                                  protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])
    assert wire.call(other_type, version=7).error_code == INCONSISTENT_GROUP_PROTOCOL
    assert sync(wire, "g", 1, member, 5, protocol=None).error_code == INCONSISTENT_GROUP_PROTOCOL  # v5 must name it
    assert sync(wire, "g", 1, member, 5, protocol=("consumer", "roundrobin")).error_code == INCONSISTENT_GROUP_PROTOCOL
    assert sync(wire, "g", 2, member, 4).error_code == ILLEGAL_GENERATION
    assert sync(wire, "g", 1, "ghost", 4).error_code == UNKNOWN_MEMBER_ID
    assert sync(wire, "nope", 1, member, 4).error_code == UNKNOWN_MEMBER_ID
    assert sync(wire, "g", 1, member, 4, {member: b""}).error_code == 0
    assert heartbeat(wire, "g", 2, member) == ILLEGAL_GENERATION
    assert heartbeat(wire, "g", 1, "ghost") == UNKNOWN_MEMBER_ID
    assert heartbeat(wire, "nope", 1, member) == UNKNOWN_MEMBER_ID
    assert heartbeat(wire, "", 1, member) == INVALID_GROUP_ID
    assert wire.call(LeaveGroupRequest(group_id="g", member_id="ghost"), version=1).error_code == UNKNOWN_MEMBER_ID
    assert [(r.group_id, r.error_code) for r in wire.call(DeleteGroupsRequest(groups_names=["g", "nope", "g"]),
                                                          version=2).results] == [("g", NON_EMPTY_GROUP),
                                                                                  ("nope", GROUP_ID_NOT_FOUND)]
    unknown = describe(wire, "nope", version=5)
    assert (unknown.error_code, unknown.group_state) == (0, "Dead")
    assert describe(wire, "nope", version=6).error_code == GROUP_ID_NOT_FOUND


def test_offset_commit_refusals(wire):
    assert commit(wire, "g", 9, {("w", 0): (1, None), ("w", 9): (1, None), ("nope", 0): (1, None)}) == {
        ("w", 0): 0, ("w", 9): UNKNOWN_TOPIC, ("nope", 0): UNKNOWN_TOPIC}
    assert commit(wire, "g", 9, {("w", 0): (1, "x" * 4097)}) == {("w", 0): OFFSET_METADATA_TOO_LARGE}
    # A member's commit to a group that does not exist: Kafka's answer depends on the version.
    assert commit(wire, "new", 8, {("w", 0): (1, None)}, generation=3, member_id="m") == {("w", 0): ILLEGAL_GENERATION}
    assert commit(wire, "new", 9, {("w", 0): (1, None)}, generation=3, member_id="m") == {("w", 0): GROUP_ID_NOT_FOUND}
    joined = join(wire, "busy", 7)
    assert commit(wire, "busy", 8, {("w", 0): (1, None)}) == {("w", 0): UNKNOWN_MEMBER_ID}  # it has members now
    assert commit(wire, "busy", 8, {("w", 0): (1, None)}, generation=1, member_id=joined.member_id) == {
        ("w", 0): REBALANCE_IN_PROGRESS}  # joined, not synced: the assignment is not out yet


def test_txn_offset_commit_is_verified_with_the_transaction_coordinator(broker, wire):
    def txn_commit(producer_id: int, epoch: int, version: int = 3) -> int:
        topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        response = wire.call(TxnOffsetCommitRequest(
            transactional_id="t", group_id="tg", producer_id=producer_id, producer_epoch=epoch, generation_id=-1,
            member_id="", group_instance_id=None, topics=[topic(name="w", partitions=[
                topic.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=3, committed_leader_epoch=-1,
                                                      committed_metadata="t")])]), version=version)
        ((partition,),) = [t.partitions for t in response.topics]
        return partition.error_code

    assert txn_commit(12345, 0) == INVALID_PRODUCER_ID_MAPPING
    init = wire.call(InitProducerIdRequest(transactional_id="t", transaction_timeout_ms=60_000, producer_id=-1,
                                           producer_epoch=-1), version=4)
    assert txn_commit(init.producer_id, 0) == INVALID_TXN_STATE  # AddOffsetsToTxn not sent
    add = AddOffsetsToTxnRequest(transactional_id="t", producer_id=init.producer_id, producer_epoch=0, group_id="tg")
    assert wire.call(add, version=3).error_code == 0
    assert txn_commit(init.producer_id, 1) == INVALID_PRODUCER_EPOCH
    assert txn_commit(init.producer_id, 0, version=0) == 0
    assert fetch(wire, "tg", 7, require_stable=True)[0][3] == 88  # UNSTABLE_OFFSET_COMMIT
    assert fetch(wire, "tg", 7)[0] == (-1, -1, "", 0)
    (partition,) = broker.state.transactions.get("t").partitions
    assert partition[0] == "__consumer_offsets"


# -- eviction ------------------------------------------------------------------------------------

def test_a_member_that_stops_heartbeating_is_evicted_and_the_group_rebalances(broker, clock):
    """A raw member joins next to a librdkafka consumer, takes its assignment and goes silent;
    moving the broker's clock past its session (but not the consumer's) evicts it, and the
    consumer gets every partition back."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "mixed", "session.timeout.ms": 45_000,
                         "heartbeat.interval.ms": 300, "auto.offset.reset": "earliest"})
    consumer.subscribe(["w"])

    def assigned() -> set[int]:
        consumer.poll(0.1)
        return {tp.partition for tp in consumer.assignment()}

    deadline = time.monotonic() + 30
    while assigned() != {0, 1}:
        assert time.monotonic() < deadline, "the consumer never got its partitions"
    with KafkaConnection(broker.bootstrap, client_id="silent") as silent:
        first = silent.call(join_request("mixed", session_ms=6_000), version=7)
        request = join_request("mixed", member_id=first.member_id, session_ms=6_000)
        correlation_id = silent.send(request, version=7)
        while not select.select([silent], [], [], 0)[0]:  # its JoinGroup is parked until the consumer rejoins
            consumer.poll(0.1)  # which it does when its heartbeat hears of the rebalance
            assert time.monotonic() < deadline, "the rebalance never completed its join phase"
        joined = silent.receive(request, 7, correlation_id)
        correlation_id = silent.send(sync_request := SyncGroupRequest(
            group_id="mixed", generation_id=joined.generation_id, member_id=joined.member_id, group_instance_id=None,
            protocol_type="consumer", protocol_name=joined.protocol_name, assignments=[]), version=5)
        while assigned() != {0} and assigned() != {1}:
            assert time.monotonic() < deadline, "the consumer never shared the partitions"
        synced = silent.receive(sync_request, 5, correlation_id)
        assert synced.error_code == 0
        assert len(ConsumerProtocolAssignment.decode(bytes(synced.assignment), version=0).partitions()) == 1

        clock.offset_ms += 7_000  # past the silent member's 6 s session, well within the consumer's 45 s
        while assigned() != {0, 1}:
            assert time.monotonic() < deadline, "the silent member was never evicted"
        assert [m.client_id for m in broker.state.groups.describe("mixed").members] == ["rdkafka"]
        assert heartbeat(silent, "mixed", joined.generation_id, joined.member_id) == UNKNOWN_MEMBER_ID
    consumer.close()
