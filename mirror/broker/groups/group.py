"""A classic consumer group's membership and state (Kafka's ``ClassicGroup``), no I/O, no timers.

States, with Kafka's names and transitions (``ClassicGroupState``)::

    Empty --a join--> PreparingRebalance --join phase over--> CompletingRebalance
      ^                  |    ^   ^                                  |       |
      +--nobody left-----+    |   +----a join, leave or expiry ------+       | the leader's SyncGroup
                              +--------- a join, leave or expiry ------ Stable <-+
    any --the broker stops--> Dead

The rebalance protocol that drives these (timers, parked requests, persistence) is in
:mod:`.rebalance`; this module only answers questions about the group and applies the
bookkeeping of each step.
"""

from __future__ import annotations

import enum
import uuid

from ..errors import ApiError, kerr
from .api import GroupDescription, JoinedMember, ListedGroup, Protocols
from .member import Member

__all__ = ["ClassicGroup", "GroupState"]


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @property
    def valid_previous(self) -> frozenset["GroupState"]:
        return _VALID_PREVIOUS[self]


_VALID_PREVIOUS = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalTransition(Exception):
    """A coordinator bug, never a client's error: the rebalance logic checks states first."""


class ClassicGroup:
    def __init__(self, group_id: str):
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.previous_state = GroupState.EMPTY
        self.generation = 0
        self.protocol_type: str | None = None
        """None for a simple group: one that only ever had offsets committed (assign() consumers)."""
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}  # in joining order: the next leader is the oldest member
        self.pending_members: set[str] = set()  # given an id by MEMBER_ID_REQUIRED, not joined yet
        self.pending_sync: set[str] = set()  # joined this generation, SyncGroup not received yet
        self.new_member_added = False  # during the initial rebalance: extend its delay

    @classmethod
    def restored(cls, group_id: str, generation: int, protocol_type: str | None, protocol_name: str | None,
                 leader_id: str | None, members: list[Member]) -> "ClassicGroup":
        """A group as last persisted: Stable with its members, or Empty (Kafka's replay of a
        ``GroupMetadataValue``)."""
        group = cls(group_id)
        group.generation, group.protocol_type, group.protocol_name = generation, protocol_type, protocol_name
        for member in members:
            group.add(member)
        if members:
            group.leader_id = leader_id
            group.state = GroupState.STABLE
        return group

    # -- questions ---------------------------------------------------------------------------

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def has_all_members_joined(self) -> bool:
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    @property
    def rebalance_timeout_ms(self) -> int:
        """The longest of the members' rebalance timeouts: how long a join phase may wait."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    @property
    def can_rebalance(self) -> bool:
        return self.state in GroupState.PREPARING_REBALANCE.valid_previous

    def supports_protocols(self, protocol_type: str, protocols: Protocols) -> bool:
        """A joining member must share the group's protocol type and one protocol every member
        supports; the first member of an empty group must just name some. A group mid-rebalance
        whose members all left (a session expired under load) has none to agree with: as in
        Kafka (``ClassicGroup.supportsProtocols``, a protocol supported by all zero members), any
        protocol of the group's type will do, or the next member would be refused for good."""
        names = {name for name, _ in protocols}
        if self.is_empty:
            return bool(protocol_type) and bool(names)
        common = self._common_protocols() if self.members else names
        return self.protocol_type == protocol_type and bool(names & common)

    def select_protocol(self) -> str:
        """The protocol most members prefer among those all support (``ClassicGroup.selectProtocol``)."""
        candidates = self._common_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=votes.__getitem__)

    def validate_member(self, member_id: str) -> Member:
        """The member, or UNKNOWN_MEMBER_ID. Static members (KIP-345) are not distinguished:
        ``group.instance.id`` is not looked at, so FENCED_INSTANCE_ID never arises."""
        member = self.members.get(member_id)
        if member is None:
            raise ApiError(kerr.UnknownMemberIdError, f"{member_id!r} is not a member of group {self.group_id!r}")
        return member

    def validate_offset_commit(self, member_id: str, generation: int, *, transactional: bool) -> None:
        """Kafka's ``ClassicGroup.validateOffsetCommit``: members commit in their generation;
        commits from outside group management (generation -1) only while the group is empty."""
        if self.state is GroupState.DEAD:
            raise ApiError(kerr.CoordinatorNotAvailableError, f"group {self.group_id!r} is being removed")
        if generation < 0 and self.is_empty:
            return
        if generation >= 0 or member_id:
            self.validate_member(member_id)
            if generation != self.generation:
                raise ApiError(kerr.IllegalGenerationError,
                               f"generation {generation} is not group {self.group_id!r}'s current {self.generation}")
        elif not transactional:
            raise ApiError(kerr.UnknownMemberIdError,
                           f"group {self.group_id!r} has members: a commit without a member id is refused")
        if not transactional and self.state is GroupState.COMPLETING_REBALANCE:
            raise ApiError(kerr.RebalanceInProgressError, f"group {self.group_id!r} is waiting for its assignment")

    def validate_delete(self) -> None:
        if not self.is_(GroupState.EMPTY):
            raise ApiError(kerr.NonEmptyGroupError, f"group {self.group_id!r} is {self.state.value}: it has members")

    def joined_members(self) -> tuple[JoinedMember, ...]:
        """The leader's JoinGroup answer: every member with its metadata for the chosen protocol."""
        return tuple(JoinedMember(m.member_id, m.instance_id, m.metadata(self.protocol_name)) for m in self.members.values())

    def describe(self) -> GroupDescription:
        stable = self.state is GroupState.STABLE
        protocol = self.protocol_name if stable else None
        return GroupDescription(self.group_id, self.state.value, self.protocol_type or "", protocol or "",
                                tuple(m.describe(protocol) for m in self.members.values()))

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, self.protocol_type or "", self.state.value)

    # -- bookkeeping ---------------------------------------------------------------------------

    def transition_to(self, state: GroupState) -> None:
        if self.state not in state.valid_previous:
            raise IllegalTransition(f"group {self.group_id}: {self.state.value} cannot become {state.value}")
        self.previous_state, self.state = self.state, state

    def new_member_id(self, client_id: str) -> str:
        """Kafka's ``generateMemberId``: the client id, a dash and a random UUID."""
        return f"{client_id}-{uuid.uuid4()}"

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        self.members.pop(member_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)

    def init_next_generation(self) -> None:
        """The join phase is over: a new generation, CompletingRebalance (or Empty if no one is left)."""
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY)
        self.pending_sync.clear()

    def _common_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names)
        for member in members[1:]:
            common &= set(member.protocol_names)
        return common
