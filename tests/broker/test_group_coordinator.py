"""The group coordinator on its own: Kafka's classic rebalance protocol, offset commit rules,
transactional offsets, timeouts through the Clock seam and recovery from its state log; then
with the transaction coordinator, whose markers end the transactional offsets.

Requests are parked futures on an event loop the test steps by hand, and time only moves
when a test moves the clock and runs the timer (``advance``), so every rebalance step is
deterministic.
"""

from __future__ import annotations

import asyncio

import pytest

from broker_helpers import ManualClock
from mirror.broker.errors import ApiError
from mirror.broker.groups import GroupConfig, GroupCoordinator, GroupStateLog, JoinRequest, OffsetsTopicMarkers
from mirror.broker.groups import offsets_partition
from mirror.broker.groups import state_log as state_log_module
from mirror.broker.transactions import TransactionCoordinator, TransactionStateLog, TxnState

UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL, INVALID_GROUP_ID = 25, 22, 23, 24
INVALID_SESSION_TIMEOUT, REBALANCE_IN_PROGRESS, OFFSET_METADATA_TOO_LARGE = 26, 27, 12
GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, MEMBER_ID_REQUIRED, UNSTABLE_OFFSET_COMMIT = 69, 68, 79, 88
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 15, 16
SESSION_MS, REBALANCE_MS = 10_000, 30_000
RANGE = (("range", b"sub-range"), ("roundrobin", b"sub-rr"))


class Harness:
    """A coordinator on a private event loop; JoinGroup and SyncGroup are tasks the test inspects."""

    def __init__(self, tmp_path, clock: ManualClock, config: GroupConfig):
        self.clock = clock
        self.loop = asyncio.new_event_loop()
        self.coordinator = GroupCoordinator(GroupStateLog(tmp_path / ".groups"), clock, config)
        self.coordinator.load()

    def join(self, member_id: str = "", group: str = "g", *, protocols=RANGE, session_ms: int = SESSION_MS,
             rebalance_ms: int = REBALANCE_MS, v4: bool = True, protocol_type: str = "consumer") -> asyncio.Task:
        request = JoinRequest(group, member_id, None, "client", "/127.0.0.1", session_ms, rebalance_ms, protocol_type,
                              protocols, requires_known_member_id=v4)
        return self._start(self.coordinator.join_group(request))

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             group: str = "g") -> asyncio.Task:
        return self._start(self.coordinator.sync_group(group, generation, member_id, "consumer", None, assignments or {}))

    def new_member(self, group: str = "g", **options) -> str:
        """A member id handed out by MEMBER_ID_REQUIRED (KIP-394)."""
        first = self.done(self.join(group=group, **options))
        assert first.error == MEMBER_ID_REQUIRED
        return first.member_id

    def done(self, task: asyncio.Task):
        self.step()
        assert task.done(), "the request is still parked"
        return task.result()

    def parked(self, task: asyncio.Task) -> bool:
        self.step()
        return not task.done()

    def advance(self, ms: int) -> None:
        self.clock.now += ms
        self.coordinator.tick()
        self.step()

    def step(self) -> None:
        for _ in range(3):
            self.loop.run_until_complete(asyncio.sleep(0))

    def _start(self, coroutine) -> asyncio.Task:
        task = self.loop.create_task(coroutine)
        self.step()
        return task

    def close(self) -> None:
        self.coordinator.close()
        self.loop.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def harness(tmp_path, clock):
    made: list[Harness] = []

    def make(delay_ms: int = 0) -> Harness:
        h = Harness(tmp_path, clock, GroupConfig(initial_rebalance_delay_ms=delay_ms))
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()


def stable_group(h: Harness, size: int, group: str = "g") -> tuple[list[str], int]:
    """``size`` members joined one generation together and synced; their ids and the generation."""
    ids = [h.new_member(group) for _ in range(size)]
    joins = [h.join(member_id, group) for member_id in ids]
    h.advance(0)  # the initial rebalance delay (0 here) ends the join phase
    results = [h.done(join) for join in joins]
    generation = results[0].generation
    leader = results[0].leader
    syncs = [h.sync(member_id, generation, {m: m.encode() for m in ids} if member_id == leader else None, group)
             for member_id in ids]
    assert [h.done(s).assignment for s in syncs] == [m.encode() for m in ids]
    return ids, generation


def error_of(call, *args) -> int:
    with pytest.raises(ApiError) as info:
        call(*args)
    return info.value.code


# -- joining -------------------------------------------------------------------------------------

def test_a_new_member_gets_its_id_first_then_joins_with_it(harness):
    h = harness()
    member_id = h.new_member()
    assert member_id.startswith("client-")
    join = h.join(member_id)
    assert h.parked(join)  # the initial rebalance waits for its delay
    h.advance(0)
    result = h.done(join)
    assert (result.error, result.generation, result.leader, result.protocol_name) == (0, 1, member_id, "range")
    assert [(m.member_id, m.metadata) for m in result.members] == [(member_id, b"sub-range")]
    sync = h.done(h.sync(member_id, 1, {member_id: b"all of it"}))
    assert (sync.error, sync.assignment, sync.protocol_type, sync.protocol_name) == (0, b"all of it", "consumer", "range")
    assert h.coordinator.describe("g").state == "Stable"
    assert h.coordinator.has_active_members("g")


def test_join_before_v4_needs_no_second_round(harness):
    h = harness()
    join = h.join(v4=False)
    h.advance(0)
    assert h.done(join).generation == 1


def test_the_initial_rebalance_waits_for_members_arriving_together(harness):
    h = harness(delay_ms=3_000)
    a = h.join(h.new_member())
    h.advance(2_000)
    b = h.join(h.new_member())  # a new member extends the delay
    h.advance(1_500)
    assert h.parked(a) and h.parked(b)
    h.advance(3_000)
    first, second = h.done(a), h.done(b)
    assert first.generation == second.generation == 1
    assert len(first.members) == 2 and second.members == ()  # only the leader gets the members


def test_protocols_must_be_shared(harness):
    h = harness()
    stable_group(h, 1)
    result = h.done(h.join(protocols=(("sticky", b""),)))
    assert result.error == INCONSISTENT_GROUP_PROTOCOL
    assert h.done(h.join(protocol_type="connect")).error == INCONSISTENT_GROUP_PROTOCOL
    assert h.done(h.join(group="fresh", protocols=())).error == INCONSISTENT_GROUP_PROTOCOL
    assert h.coordinator.describe("fresh") is None  # a refused first join creates no group


def test_joins_refused_before_the_group(harness):
    h = harness()
    assert h.done(h.join(group="")).error == INVALID_GROUP_ID
    assert h.done(h.join(session_ms=5_999)).error == INVALID_SESSION_TIMEOUT
    assert h.done(h.join(session_ms=1_800_001)).error == INVALID_SESSION_TIMEOUT
    assert h.done(h.join("who-is-this")).error == UNKNOWN_MEMBER_ID


def test_a_joining_member_rebalances_a_stable_group(harness):
    h = harness()
    (a,), generation = stable_group(h, 1)
    b = h.new_member()
    join_b = h.join(b)
    assert h.parked(join_b)  # waits for a to rejoin
    assert error_of(h.coordinator.heartbeat, "g", generation, a) == REBALANCE_IN_PROGRESS
    join_a = h.join(a)
    result_a, result_b = h.done(join_a), h.done(join_b)
    assert result_a.generation == result_b.generation == generation + 1
    assert result_a.leader == a and {m.member_id for m in result_a.members} == {a, b}
    sync_b = h.sync(b, generation + 1)
    assert h.parked(sync_b)  # until the leader's assignments arrive
    assert h.done(h.sync(a, generation + 1, {a: b"0,1", b: b"2,3"})).assignment == b"0,1"
    assert h.done(sync_b).assignment == b"2,3"


def test_the_leader_rejoining_forces_a_rebalance_a_follower_does_not(harness):
    h = harness()
    (a, b), generation = stable_group(h, 2)
    follower = h.done(h.join(b))  # same metadata: the current generation again, no rebalance
    assert (follower.generation, follower.members) == (generation, ())
    assert h.coordinator.describe("g").state == "Stable"
    leader_join = h.join(a)
    assert h.parked(leader_join)
    assert h.coordinator.describe("g").state == "PreparingRebalance"


# -- leaving and timing out ----------------------------------------------------------------------

def test_leave_rebalances_the_others(harness):
    h = harness()
    (a, b), generation = stable_group(h, 2)
    assert h.coordinator.leave_group("g", [b, "stranger"]) == [0, UNKNOWN_MEMBER_ID]
    assert error_of(h.coordinator.heartbeat, "g", generation, a) == REBALANCE_IN_PROGRESS
    result = h.done(h.join(a))  # alone now: the join phase ends at once
    assert (result.generation, [m.member_id for m in result.members]) == (generation + 1, [a])
    assert error_of(h.coordinator.leave_group, "nope", [a]) == UNKNOWN_MEMBER_ID


def test_the_last_member_leaving_empties_the_group(harness):
    h = harness()
    (a,), generation = stable_group(h, 1)
    h.coordinator.leave_group("g", [a])
    description = h.coordinator.describe("g")
    assert (description.state, description.members) == ("Empty", ())
    assert not h.coordinator.has_active_members("g")


def test_a_member_that_stops_heartbeating_is_removed(harness):
    h = harness()
    (a, b), generation = stable_group(h, 2)
    h.advance(SESSION_MS - 1)
    h.coordinator.heartbeat("g", generation, a)  # a lives on, b stays silent
    h.advance(2)
    assert {m.member_id for m in h.coordinator.describe("g").members} == {a}
    assert error_of(h.coordinator.heartbeat, "g", generation, a) == REBALANCE_IN_PROGRESS
    assert error_of(h.coordinator.heartbeat, "g", generation, b) == UNKNOWN_MEMBER_ID
    assert h.done(h.join(a)).generation == generation + 1


def test_an_offset_commit_keeps_the_session_alive(harness):
    h = harness()
    (a,), generation = stable_group(h, 1)
    h.advance(SESSION_MS - 1)
    h.coordinator.commit_offsets("g", generation, a, {("t", 0): (5, -1, None)})
    h.advance(SESSION_MS - 1)
    assert h.coordinator.has_active_members("g")


def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout(harness):
    h = harness()
    (a, b), generation = stable_group(h, 2)
    join_a = h.join(a)  # the leader rejoins; b keeps heartbeating but never rejoins
    for _ in range(REBALANCE_MS // 5_000 - 1):
        h.advance(5_000)
        assert error_of(h.coordinator.heartbeat, "g", generation, b) == REBALANCE_IN_PROGRESS
    assert h.parked(join_a)
    h.advance(5_000)
    result = h.done(join_a)
    assert (result.generation, [m.member_id for m in result.members]) == (generation + 1, [a])


def test_a_member_that_does_not_sync_is_dropped_at_the_rebalance_timeout(harness):
    h = harness()
    long_session = {"session_ms": 2 * REBALANCE_MS}  # the sync phase, not the session, runs out
    a, b = h.new_member(**long_session), h.new_member(**long_session)
    joins = [h.join(a, **long_session), h.join(b, **long_session)]
    h.advance(0)
    generation = h.done(joins[0]).generation
    sync_a = h.sync(a, generation, {a: b"x", b: b"y"})
    assert h.done(sync_a).error == 0
    h.advance(REBALANCE_MS)  # b never sent SyncGroup
    assert h.coordinator.describe("g").state == "PreparingRebalance"
    assert [m.member_id for m in h.coordinator.describe("g").members] == [a]


def test_a_pending_member_that_never_comes_back_is_forgotten(harness):
    h = harness()
    pending = h.new_member()
    h.advance(SESSION_MS + 1)
    assert h.done(h.join(pending)).error == UNKNOWN_MEMBER_ID


def test_a_new_join_during_the_sync_phase_sends_the_waiting_members_back(harness):
    h = harness()
    a, b = h.new_member(), h.new_member()
    joins = [h.join(a), h.join(b)]
    h.advance(0)
    generation = h.done(joins[1]).generation
    sync_b = h.sync(b, generation)
    h.join(h.new_member())  # a third member arrives before the leader synced
    assert h.done(sync_b).error == REBALANCE_IN_PROGRESS
    assert h.done(h.sync(a, generation, {})).error == REBALANCE_IN_PROGRESS


def test_sync_refusals(harness):
    h = harness()
    (a,), generation = stable_group(h, 1)
    assert h.done(h.sync("stranger", generation)).error == UNKNOWN_MEMBER_ID
    assert h.done(h.sync(a, generation + 1)).error == ILLEGAL_GENERATION
    assert h.done(h.sync(a, generation, group="nope")).error == UNKNOWN_MEMBER_ID
    wrong_protocol = h.coordinator.sync_group("g", generation, a, "consumer", "roundrobin", {})
    assert h.done(h._start(wrong_protocol)).error == INCONSISTENT_GROUP_PROTOCOL
    assert h.done(h.sync(a, generation)).assignment == a.encode()  # Stable: the current assignment again


def test_heartbeat_refusals(harness):
    h = harness()
    (a,), generation = stable_group(h, 1)
    assert error_of(h.coordinator.heartbeat, "nope", generation, a) == UNKNOWN_MEMBER_ID
    assert error_of(h.coordinator.heartbeat, "g", generation, "stranger") == UNKNOWN_MEMBER_ID
    assert error_of(h.coordinator.heartbeat, "g", generation - 1, a) == ILLEGAL_GENERATION
    assert error_of(h.coordinator.heartbeat, "", generation, a) == INVALID_GROUP_ID


def test_unload_answers_parked_requests(harness):
    h = harness()
    join = h.join(h.new_member())
    h.coordinator.unload()
    assert h.done(join).error == NOT_COORDINATOR
    assert h.done(h.join()).error == COORDINATOR_NOT_AVAILABLE


# -- offsets -------------------------------------------------------------------------------------

def test_members_commit_in_their_generation(harness):
    h = harness()
    (a,), generation = stable_group(h, 1)
    assert h.coordinator.commit_offsets("g", generation, a, {("t", 0): (42, 3, "meta")}) == {("t", 0): 0}
    assert h.coordinator.fetch_offsets("g", [("t", 0), ("t", 1)], False) == {("t", 0): (42, 3, "meta", 0),
                                                                             ("t", 1): (-1, -1, "", 0)}
    assert error_of(h.coordinator.commit_offsets, "g", generation - 1, a, {("t", 0): (1, -1, None)}) == ILLEGAL_GENERATION
    assert error_of(h.coordinator.commit_offsets, "g", generation, "stranger", {("t", 0): (1, -1, None)}) == UNKNOWN_MEMBER_ID
    assert error_of(h.coordinator.commit_offsets, "g", -1, "", {("t", 0): (1, -1, None)}) == UNKNOWN_MEMBER_ID
    assert error_of(h.coordinator.commit_offsets, "nope", 3, "x", {("t", 0): (1, -1, None)}) == GROUP_ID_NOT_FOUND
    assert h.coordinator.committed_offsets("g")[("t", 0)].offset == 42


def test_commits_wait_while_the_group_waits_for_its_assignment(harness):
    h = harness()
    a = h.new_member()
    join = h.join(a)
    h.advance(0)
    generation = h.done(join).generation
    assert error_of(h.coordinator.commit_offsets, "g", generation, a, {("t", 0): (1, -1, None)}) == REBALANCE_IN_PROGRESS


def test_simple_groups_and_admins_commit_without_membership(harness):
    h = harness()
    assert h.coordinator.commit_offsets("simple", -1, "", {("t", 0): (7, -1, None), ("t", 1): (9, -1, "x" * 4097)}) == {
        ("t", 0): 0, ("t", 1): OFFSET_METADATA_TOO_LARGE}
    assert h.coordinator.fetch_offsets("simple", None, False) == {("t", 0): (7, -1, "", 0)}
    listed = h.coordinator.list_groups()
    assert [(g.group_id, g.protocol_type, g.state) for g in listed] == [("simple", "", "Empty")]
    (a,), generation = stable_group(h, 1, group="g")
    h.coordinator.leave_group("g", [a])
    assert h.coordinator.commit_offsets("g", -1, "", {("t", 0): (1, -1, None)}) == {("t", 0): 0}  # empty again: an admin may


def test_transactional_offsets_are_invisible_until_the_transaction_commits(harness):
    h = harness()
    h.coordinator.commit_offsets("g", -1, "", {("t", 0): (5, -1, None)})
    h.coordinator.commit_transactional_offsets("g", 1000, -1, "", {("t", 0): (10, -1, "txn"), ("t", 1): (20, -1, None)})
    assert h.coordinator.fetch_offsets("g", [("t", 0), ("t", 1)], False) == {("t", 0): (5, -1, "", 0),
                                                                             ("t", 1): (-1, -1, "", 0)}
    assert h.coordinator.fetch_offsets("g", None, True) == {("t", 0): (-1, -1, "", UNSTABLE_OFFSET_COMMIT)}
    h.coordinator.complete_transaction(1000, commit=True)
    assert h.coordinator.fetch_offsets("g", None, True) == {("t", 0): (10, -1, "txn", 0), ("t", 1): (20, -1, "", 0)}


def test_aborted_transactional_offsets_are_dropped(harness):
    h = harness()
    h.coordinator.commit_transactional_offsets("g", 1000, -1, "", {("t", 0): (10, -1, None)})
    h.coordinator.complete_transaction(1000, commit=False)
    assert h.coordinator.fetch_offsets("g", [("t", 0)], True) == {("t", 0): (-1, -1, "", 0)}
    h.coordinator.complete_transaction(1000, commit=True)  # a marker written again: nothing left to commit
    assert h.coordinator.committed_offsets("g") == {}


def test_a_plain_commit_after_the_transactional_one_wins(harness):
    """Kafka keeps the later of the two (``replayEndTransactionMarker`` compares record offsets)."""
    h = harness()
    h.coordinator.commit_transactional_offsets("g", 1000, -1, "", {("t", 0): (10, -1, None)})
    h.coordinator.commit_offsets("g", -1, "", {("t", 0): (15, -1, None)})
    h.coordinator.complete_transaction(1000, commit=True)
    assert h.coordinator.committed_offsets("g")[("t", 0)].offset == 15


def test_a_deleted_topics_offsets_go_committed_and_pending_and_stay_gone_after_a_restart(tmp_path, clock):
    """Kafka's ``onPartitionsDeleted``: every group's offsets of the topic get tombstones,
    those pending in an open transaction too; other topics' offsets stay."""
    h = Harness(tmp_path, clock, GroupConfig())
    h.coordinator.commit_offsets("g", -1, "", {("gone", 0): (5, -1, None), ("kept", 0): (3, -1, None)})
    h.coordinator.commit_offsets("other", -1, "", {("gone", 1): (7, -1, None)})
    h.coordinator.commit_transactional_offsets("g", 1000, -1, "", {("gone", 1): (9, -1, None)})
    h.coordinator.on_topic_deleted("gone")
    h.coordinator.complete_transaction(1000, commit=True)  # its pending offset of the topic went before
    assert h.coordinator.fetch_offsets("g", None, True) == {("kept", 0): (3, -1, "", 0)}
    assert h.coordinator.fetch_offsets("other", None, True) == {}
    h.close()
    again = Harness(tmp_path, clock, GroupConfig())  # replays the state log
    try:
        assert again.coordinator.fetch_offsets("g", None, True) == {("kept", 0): (3, -1, "", 0)}
        assert again.coordinator.fetch_offsets("other", None, True) == {}
    finally:
        again.close()


def test_transactional_commits_check_the_member_when_named(harness):
    h = harness()
    (a,), generation = stable_group(h, 1)
    commit = h.coordinator.commit_transactional_offsets
    assert error_of(commit, "g", 1000, generation + 1, a, {("t", 0): (1, -1, None)}) == ILLEGAL_GENERATION
    assert error_of(commit, "g", 1000, generation, "zombie", {("t", 0): (1, -1, None)}) == UNKNOWN_MEMBER_ID
    assert error_of(commit, "nope", 1000, 4, "x", {("t", 0): (1, -1, None)}) == ILLEGAL_GENERATION
    assert commit("g", 1000, -1, "", {("t", 0): (1, -1, None)}) == {("t", 0): 0}  # old producers name no member
    assert commit("g", 1000, generation, a, {("t", 0): (2, -1, None)}) == {("t", 0): 0}


def test_delete_groups(harness):
    h = harness()
    (a,), _ = stable_group(h, 1, group="busy")
    h.coordinator.commit_offsets("idle", -1, "", {("t", 0): (3, -1, None)})
    h.coordinator.commit_transactional_offsets("idle", 1000, -1, "", {("t", 1): (4, -1, None)})
    assert h.coordinator.delete_groups(["busy", "idle", "nope"]) == {"busy": NON_EMPTY_GROUP, "idle": 0,
                                                                    "nope": GROUP_ID_NOT_FOUND}
    h.coordinator.complete_transaction(1000, commit=True)
    assert h.coordinator.describe("idle") is None and h.coordinator.committed_offsets("idle") == {}


def test_list_groups_filters_by_state_and_type(harness):
    h = harness()
    stable_group(h, 1, group="a")
    h.coordinator.commit_offsets("b", -1, "", {("t", 0): (1, -1, None)})
    assert [g.group_id for g in h.coordinator.list_groups(states=["STABLE"])] == ["a"]
    assert [g.group_id for g in h.coordinator.list_groups(states=["empty"], types=["classic"])] == ["b"]
    assert h.coordinator.list_groups(types=["consumer"]) == []


# -- durability ----------------------------------------------------------------------------------

def test_offsets_groups_and_pending_transactions_survive_a_reload(harness):
    h = harness()
    (a, b), generation = stable_group(h, 2)
    h.coordinator.commit_offsets("g", generation, a, {("t", 0): (11, 2, "m")})
    h.coordinator.commit_offsets("simple", -1, "", {("t", 0): (1, -1, None)})
    h.coordinator.commit_transactional_offsets("txn", 1000, -1, "", {("t", 0): (30, -1, None)})
    h.coordinator.commit_offsets("gone", -1, "", {("t", 0): (1, -1, None)})
    h.coordinator.delete_groups(["gone"])
    h.close()

    again = harness()
    description = again.coordinator.describe("g")
    assert (description.state, [m.member_id for m in description.members]) == ("Stable", [a, b])
    assert [m.assignment for m in description.members] == [a.encode(), b.encode()]
    again.advance(5_000)
    again.coordinator.heartbeat("g", generation, b)  # members go on in their generation
    assert again.coordinator.committed_offsets("g")[("t", 0)].offset == 11
    assert again.coordinator.fetch_offsets("txn", None, True) == {}  # still pending
    again.coordinator.complete_transaction(1000, commit=True)
    assert again.coordinator.committed_offsets("txn")[("t", 0)].offset == 30
    assert again.coordinator.describe("gone") is None
    again.advance(SESSION_MS - 5_000)  # loaded members' sessions started at load: a's is over
    assert again.coordinator.describe("g").state == "PreparingRebalance"
    assert [m.member_id for m in again.coordinator.describe("g").members] == [b]


def test_a_torn_last_record_is_cut_off(harness, tmp_path):
    h = harness()
    h.coordinator.commit_offsets("g", -1, "", {("t", 0): (1, -1, None)})
    h.coordinator.commit_offsets("g", -1, "", {("t", 0): (2, -1, None)})
    h.close()
    path = tmp_path / ".groups" / "state.log"
    path.write_bytes(path.read_bytes()[:-3])
    again = harness()
    assert again.coordinator.committed_offsets("g")[("t", 0)].offset == 1
    again.coordinator.commit_offsets("g", -1, "", {("t", 0): (3, -1, None)})
    again.close()
    assert harness().coordinator.committed_offsets("g")[("t", 0)].offset == 3


def test_the_state_log_is_compacted_to_the_live_state(harness, tmp_path, monkeypatch):
    monkeypatch.setattr(state_log_module, "COMPACT_SLACK", 10)
    h = harness()
    for i in range(50):
        h.coordinator.commit_offsets("g", -1, "", {("t", i % 2): (i, -1, None)})
    h.coordinator.commit_transactional_offsets("g", 1000, -1, "", {("t", 0): (100, -1, None)})
    h.coordinator.commit_offsets("g", -1, "", {("t", 0): (60, -1, None)})  # after the transactional one
    h.close()
    lines = (tmp_path / ".groups" / "state.log").read_bytes().count(b'"t":"offset"')
    assert lines < 20
    again = harness()
    again.coordinator.complete_transaction(1000, commit=True)
    assert {tp: o.offset for tp, o in again.coordinator.committed_offsets("g").items()} == {("t", 0): 60, ("t", 1): 49}


# -- with the transaction coordinator ------------------------------------------------------------

class DataMarkers:
    """The log partitions' marker writer, recording instead of writing."""

    def __init__(self) -> None:
        self.written: list[tuple[str, int]] = []

    def write_markers(self, partitions, producer_id, producer_epoch, *, commit, coordinator_epoch):
        self.written += sorted(partitions)


class Coordinators:
    """A transaction coordinator whose markers reach a group coordinator, both on ``tmp_path``,
    loaded in the broker's order (groups first)."""

    def __init__(self, tmp_path, clock: ManualClock):
        self.groups = GroupCoordinator(GroupStateLog(tmp_path / ".groups"), clock, GroupConfig())
        self.data = DataMarkers()
        ids = iter(range(1000, 2000))
        self.transactions = TransactionCoordinator(TransactionStateLog(tmp_path / ".transactions"), lambda: next(ids),
                                                   OffsetsTopicMarkers(self.data, self.groups), clock)
        self.groups.load()
        self.transactions.load()

    def begin_with_offsets(self, transactional_id: str, group: str, offset: int) -> tuple[int, int]:
        pid, epoch = self.transactions.init_producer_id(transactional_id, 60_000)
        self.transactions.add_partitions(transactional_id, pid, epoch, [("data", 0), offsets_partition(group)])
        self.groups.commit_transactional_offsets(group, pid, -1, "", {("in", 0): (offset, -1, None)})
        return pid, epoch

    def close(self) -> None:
        self.transactions.close()
        self.groups.close()


def test_end_txn_commits_or_drops_the_offsets_through_the_marker(tmp_path, clock):
    both = Coordinators(tmp_path, clock)
    pid, epoch = both.begin_with_offsets("app", "g", 5)
    both.transactions.end_txn("app", pid, epoch, commit=True)
    assert both.data.written == [("data", 0)]  # the offsets partition is not a log partition
    assert both.groups.committed_offsets("g")[("in", 0)].offset == 5
    pid, epoch = both.begin_with_offsets("app", "g", 9)
    both.transactions.end_txn("app", pid, epoch, commit=False)
    assert both.groups.committed_offsets("g")[("in", 0)].offset == 5
    both.close()


def test_offsets_of_a_transaction_decided_before_a_crash_are_committed_on_load(tmp_path, clock, monkeypatch):
    both = Coordinators(tmp_path, clock)
    pid, epoch = both.begin_with_offsets("app", "g", 5)
    with monkeypatch.context() as patch:
        patch.setattr(GroupStateLog, "append", lambda self, records: (_ for _ in ()).throw(OSError("disk gone")))
        both.transactions.end_txn("app", pid, epoch, commit=True)  # decided, its offsets marker failed
    assert both.transactions.get("app").state is TxnState.PREPARE_COMMIT
    assert both.groups.committed_offsets("g") == {}
    both.close()

    again = Coordinators(tmp_path, clock)  # the crash: load completes the in-doubt transaction
    assert again.transactions.get("app").state is TxnState.COMPLETE_COMMIT
    assert again.groups.committed_offsets("g")[("in", 0)].offset == 5
    again.close()


def test_a_timed_out_transaction_drops_its_offsets(tmp_path, clock):
    both = Coordinators(tmp_path, clock)
    both.begin_with_offsets("app", "g", 5)
    clock.now += 60_001
    both.transactions.tick()
    assert both.groups.fetch_offsets("g", [("in", 0)], True) == {("in", 0): (-1, -1, "", 0)}
    both.close()


def test_a_group_mid_rebalance_with_no_members_left_takes_any_protocol_of_its_type():
    """Kafka's rule (``ClassicGroup.supportsProtocols``): a protocol every member supports; with
    no member left that is any protocol, so the next member is not refused for good (a member
    refused so gives up: kafka-python calls INCONSISTENT_GROUP_PROTOCOL fatal)."""
    from mirror.broker.groups.group import ClassicGroup, GroupState

    group = ClassicGroup("g")
    group.protocol_type, group.state = "consumer", GroupState.PREPARING_REBALANCE
    assert group.supports_protocols("consumer", (("roundrobin", b""),))
    assert not group.supports_protocols("connect", (("roundrobin", b""),))
    assert not group.supports_protocols("consumer", ())
