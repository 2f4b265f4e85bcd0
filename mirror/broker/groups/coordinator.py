"""The group coordinator: Kafka's ``GroupCoordinatorService`` for classic groups on one node.

It owns the groups, the committed offsets and their state log, and the timer; the rebalance
protocol itself is :class:`RebalanceProtocol`. Every change is persisted
(:class:`GroupStateLog`) before it is applied or answered. Errors are Kafka's
(:class:`ApiError`, or an error code inside a JoinGroup/SyncGroup result); the handlers only
map them onto request versions.

Offsets (Kafka's ``OffsetMetadataManager``):

- OffsetCommit from a member is checked against the group (member id, generation, not while
  the group waits for its assignment); from outside group management (generation -1: an
  assign() consumer, an admin) it is accepted while the group has no members, and a group
  that does not exist yet is created for it, a *simple group* (no protocol type);
- TxnOffsetCommit stores offsets pending in the producer's transaction, invisible to
  OffsetFetch (which answers UNSTABLE_OFFSET_COMMIT for them when asked for stable offsets)
  until the transaction coordinator's markers end it (:meth:`complete_transaction`): committed
  offsets on COMMIT, nothing on ABORT;
- offsets never expire (no ``offsets.retention.minutes``); DeleteGroups removes an empty
  group with all its offsets.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Iterable

from ..errors import ApiError, kerr
from .api import GroupDescription, JoinRequest, JoinResult, ListedGroup, SyncResult
from .group import ClassicGroup, GroupState
from .member import Member
from .offsets import OffsetAndMetadata, OffsetStore, TopicPartition
from .rebalance import GroupConfig, RebalanceProtocol
from .state_log import (
    GroupDeletedRecord,
    GroupRecord,
    GroupStateLog,
    MemberRecord,
    OffsetRecord,
    Record,
    TopicDeletedRecord,
    TxnEndRecord,
)
from .timer import Timer

__all__ = ["GroupCoordinator", "OffsetCommit"]

log = logging.getLogger(__name__)

OffsetCommit = tuple[int, int, str | None]
"""What a consumer commits for one partition: ``(offset, leader_epoch, metadata)``."""
FetchedOffset = tuple[int, int, str, int]
"""OffsetFetch's answer for one partition: ``(offset, leader_epoch, metadata, error)``; -1 offsets when none."""


class GroupCoordinator:
    def __init__(self, state_log: GroupStateLog, clock: Callable[[], int], config: GroupConfig = GroupConfig()):
        self.config = config
        self._log = state_log
        self._clock = clock
        self._groups: dict[str, ClassicGroup] = {}
        self._offsets = OffsetStore()
        self._timer = Timer()
        self._sequence = 0  # commit order, see OffsetStore
        self._active = False
        self._rebalance = RebalanceProtocol(self._groups, self._timer, clock, config, self._persist_group)

    # -- lifecycle ---------------------------------------------------------------------------

    def load(self) -> None:
        """Replay the state log; loaded members' sessions start now. Before the transaction
        coordinator loads: completing its in-doubt transactions ends pending offsets here."""
        for record in self._log.load():
            self._apply(record)
        for group in self._groups.values():
            self._rebalance.loaded(group)
        self._active = True
        log.info("group coordinator loaded %d groups, %d with members", len(self._groups),
                 sum(1 for group in self._groups.values() if group.members))

    def tick(self) -> None:
        """Run the expired timers: session timeouts, join and sync phase deadlines."""
        self._timer.run_expired(self._clock())

    def unload(self) -> None:
        """Stop coordinating: parked JoinGroup and SyncGroup requests get NOT_COORDINATOR now,
        later requests COORDINATOR_NOT_AVAILABLE (the broker is stopping)."""
        self._active = False
        self._rebalance.unload()

    def close(self) -> None:
        self._log.close()

    # -- what the rest of the broker may ask ---------------------------------------------------

    def committed_offsets(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (not those pending in a transaction)."""
        return self._offsets.committed(group_id)

    def has_active_members(self, group_id: str) -> bool:
        group = self._groups.get(group_id)
        return group is not None and bool(group.members)

    def describe(self, group_id: str) -> GroupDescription | None:
        """The group as DescribeGroups reports it; None if it does not exist."""
        group = self._groups.get(group_id)
        return None if group is None else group.describe()

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[ListedGroup]:
        """Every group, or those in one of ``states`` and of one of ``types`` (case-insensitive, ListGroups v4+)."""
        wanted_states = {state.strip().lower() for state in states}
        wanted_types = {kind.strip().lower() for kind in types}
        listed = [group.listed() for group in self._groups.values()]
        return [entry for entry in listed
                if (not wanted_states or entry.state.lower() in wanted_states)
                and (not wanted_types or entry.group_type in wanted_types)]

    # -- membership ----------------------------------------------------------------------------

    async def join_group(self, request: JoinRequest) -> JoinResult:
        """A JoinGroup, answered once the join phase it belongs to is over."""
        error = self._join_refusal(request)
        if error is not None:
            return JoinResult(error.code, request.member_id)
        waiter = asyncio.get_running_loop().create_future()
        self._rebalance.join(request, waiter)
        return await waiter

    async def sync_group(self, group_id: str, generation: int, member_id: str, protocol_type: str | None,
                         protocol_name: str | None, assignments: dict[str, bytes]) -> SyncResult:
        """A SyncGroup, answered once the leader's assignments are in."""
        try:
            self._check_active(group_id, named=True)
        except ApiError as exc:
            return SyncResult(exc.code)
        waiter = asyncio.get_running_loop().create_future()
        self._rebalance.sync(group_id, generation, member_id, protocol_type, protocol_name, assignments, waiter)
        return await waiter

    def heartbeat(self, group_id: str, generation: int, member_id: str) -> None:
        self._check_active(group_id, named=True)
        self._rebalance.heartbeat(group_id, generation, member_id)

    def leave_group(self, group_id: str, member_ids: list[str]) -> list[int]:
        self._check_active(group_id, named=True)
        return self._rebalance.leave(group_id, member_ids)

    def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        """DeleteGroups: an error code per group; only groups without members go, with their offsets."""
        results = {}
        for group_id in group_ids:
            try:
                self._check_active(group_id)
                group = self._groups.get(group_id)
                if group is None:
                    raise ApiError(kerr.GroupIdNotFoundError, f"group {group_id!r} does not exist")
                group.validate_delete()
                self._persist([GroupDeletedRecord(group_id)])
                results[group_id] = 0
            except ApiError as exc:
                results[group_id] = exc.code
        return results

    def on_topic_deleted(self, topic: str) -> None:
        """DeleteTopics removed ``topic``: every group's offsets of it go too (committed, and
        pending in open transactions), as Kafka's ``GroupCoordinator.onPartitionsDeleted``
        writes their tombstones, so that a topic created again under the name is not read from
        a stale position. The groups stay, as Kafka keeps them until its periodic clean-up."""
        groups = self._offsets.groups_of_topic(topic)
        if not groups:
            return
        try:
            self._persist([TopicDeletedRecord(topic)])
        except ApiError as exc:
            log.error("offsets of deleted topic %s not removed from group(s) %s: %s", topic, ", ".join(sorted(groups)),
                      exc)
            return
        log.info("offsets of deleted topic %s removed from group(s) %s", topic, ", ".join(sorted(groups)))

    # -- offsets -------------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, generation: int, member_id: str,
                       offsets: dict[TopicPartition, OffsetCommit]) -> dict[TopicPartition, int]:
        """OffsetCommit: an error code per partition, or ApiError for the whole request.

        A group that does not exist is created (a simple group) for a commit from outside
        group management; a member's commit to it gets GROUP_ID_NOT_FOUND (the handler answers
        ILLEGAL_GENERATION before OffsetCommit v9, as Kafka does).
        """
        group = self._group_for_commit(group_id, generation)
        group.validate_offset_commit(member_id, generation, transactional=False)
        if group.is_(GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self._rebalance.reschedule_heartbeat(group, group.members[member_id])  # a commit keeps the session
        return self._store(group_id, offsets, producer_id=-1)

    def commit_transactional_offsets(self, group_id: str, producer_id: int, generation: int, member_id: str,
                                     offsets: dict[TopicPartition, OffsetCommit]) -> dict[TopicPartition, int]:
        """TxnOffsetCommit, once the transaction coordinator has verified that the producer's
        transaction includes the group: offsets pending until the transaction ends."""
        self._check_active(group_id, named=True)
        group = self._group_for_commit(group_id, generation, unknown=kerr.IllegalGenerationError)
        group.validate_offset_commit(member_id, generation, transactional=True)
        return self._store(group_id, offsets, producer_id=producer_id)

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      require_stable: bool) -> dict[TopicPartition, FetchedOffset]:
        """OffsetFetch for the given partitions (None: every partition with a committed offset).

        With ``require_stable`` (v7+, KIP-447), a partition with offsets pending in an open
        transaction gets UNSTABLE_OFFSET_COMMIT, which clients retry, instead of an offset
        that is about to change.
        """
        self._check_active(group_id)
        committed = self._offsets.committed(group_id)
        wanted = sorted(committed) if partitions is None else partitions
        results = {}
        for partition in wanted:
            found = committed.get(partition)
            if require_stable and self._offsets.has_pending(group_id, partition):
                results[partition] = (-1, -1, "", kerr.UnstableOffsetCommitError.errno)
            elif found is None:
                results[partition] = (-1, -1, "", 0)
            else:
                results[partition] = (found.offset, found.leader_epoch, found.metadata, 0)
        return results

    def complete_transaction(self, producer_id: int, commit: bool) -> None:
        """The transaction coordinator's marker for ``__consumer_offsets``: the producer's pending
        offsets become committed, or are dropped. Raises COORDINATOR_NOT_AVAILABLE if that could
        not be persisted; the transaction stays in doubt and its markers are written again."""
        if not self._offsets.has_pending_transaction(producer_id):
            return  # a marker written again after a crash, or a transaction without offsets
        self._persist([TxnEndRecord(producer_id, commit)])
        log.info("transactional offsets of producer %d %s", producer_id, "committed" if commit else "aborted")

    # -- internals -----------------------------------------------------------------------------

    def _join_refusal(self, request: JoinRequest) -> ApiError | None:
        try:
            self._check_active(request.group_id, named=True)
        except ApiError as exc:
            return exc
        low, high = self.config.min_session_timeout_ms, self.config.max_session_timeout_ms
        if not low <= request.session_timeout_ms <= high:
            return ApiError(kerr.InvalidSessionTimeoutError,
                            f"session timeout {request.session_timeout_ms} ms is not in {low}..{high}")
        return None

    def _check_active(self, group_id: str, *, named: bool = False) -> None:
        """COORDINATOR_NOT_AVAILABLE once unloaded; INVALID_GROUP_ID for an empty id where Kafka
        refuses one (the membership APIs and TxnOffsetCommit; the others accept it)."""
        if not self._active:
            raise ApiError(kerr.CoordinatorNotAvailableError, f"the group coordinator is not running (group {group_id!r})")
        if named and not group_id:
            raise ApiError(kerr.InvalidGroupIdError, "the group id must not be empty")

    def _group_for_commit(self, group_id: str, generation: int,
                          unknown: type[kerr.BrokerResponseError] = kerr.GroupIdNotFoundError) -> ClassicGroup:
        self._check_active(group_id)
        group = self._groups.get(group_id)
        if group is not None:
            return group
        if generation >= 0:
            raise ApiError(unknown, f"group {group_id!r} does not exist, so generation {generation} cannot be in it")
        log.info("group %s: created as a simple group by an offset commit", group_id)
        group = self._groups[group_id] = ClassicGroup(group_id)
        return group

    def _store(self, group_id: str, offsets: dict[TopicPartition, OffsetCommit],
               producer_id: int) -> dict[TopicPartition, int]:
        now = self._clock()
        limit = self.config.offset_metadata_max_bytes
        results, records = {}, []
        for (topic, partition), (offset, leader_epoch, metadata) in offsets.items():
            if metadata is not None and len(metadata) > limit:
                results[(topic, partition)] = kerr.OffsetMetadataTooLargeError.errno
                continue
            results[(topic, partition)] = 0
            records.append(OffsetRecord(group_id, topic, partition, offset, leader_epoch, metadata or "", now, producer_id))
        if records:
            self._persist(records)
        return results

    def _persist_group(self, group: ClassicGroup) -> None:
        """A generation's members and assignments, as Kafka's GroupMetadataValue (raises OSError)."""
        self._log.append([_group_record(group)])
        self._log.maybe_compact(self._live_records)

    def _persist(self, records: list[Record]) -> None:
        """Append, then apply: what is applied (and answered) is always on disk first."""
        try:
            self._log.append(records)
        except OSError as exc:
            log.error("group state not persisted to %s: %s", self._log.path, exc)
            raise ApiError(kerr.CoordinatorNotAvailableError, f"group state not persisted: {exc}") from exc
        for record in records:
            self._apply(record)
        self._log.maybe_compact(self._live_records)

    def _apply(self, record: Record) -> None:
        if isinstance(record, OffsetRecord):
            self._sequence += 1
            offset = OffsetAndMetadata(record.offset, record.leader_epoch, record.metadata, record.commit_ms, self._sequence)
            partition = (record.topic, record.partition)
            if record.producer_id < 0:
                self._offsets.commit(record.group_id, partition, offset)
            else:
                self._offsets.commit_pending(record.producer_id, record.group_id, partition, offset)
            if record.group_id not in self._groups:
                self._groups[record.group_id] = ClassicGroup(record.group_id)  # a simple group
        elif isinstance(record, TxnEndRecord):
            self._offsets.end_transaction(record.producer_id, record.commit)
        elif isinstance(record, GroupRecord):
            self._groups[record.group_id] = _loaded_group(record)
        elif isinstance(record, TopicDeletedRecord):
            self._offsets.delete_topic(record.topic)
        else:
            self._groups.pop(record.group_id, None)
            self._offsets.delete_group(record.group_id)

    def _live_records(self) -> list[Record]:
        """The state as few records as replay needs: groups with a generation, then every offset in commit order."""
        records: list[Record] = [_group_record(group) for group in self._groups.values() if group.generation > 0]
        records += [OffsetRecord(group_id, topic, partition, offset.offset, offset.leader_epoch, offset.metadata,
                                 offset.commit_ms, producer_id)
                    for producer_id, group_id, (topic, partition), offset in self._offsets.snapshot()]
        return records


def _group_record(group: ClassicGroup) -> GroupRecord:
    members = tuple(MemberRecord(m.member_id, m.instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                                 m.rebalance_timeout_ms, m.metadata(group.protocol_name), m.assignment)
                    for m in group.members.values())
    return GroupRecord(group.group_id, group.generation, group.protocol_type, group.protocol_name, group.leader_id,
                       members)


def _loaded_group(record: GroupRecord) -> ClassicGroup:
    members = [Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                      m.rebalance_timeout_ms, record.protocol_type or "", ((record.protocol_name or "", m.subscription),),
                      assignment=m.assignment)
               for m in record.members]
    return ClassicGroup.restored(record.group_id, record.generation, record.protocol_type, record.protocol_name,
                                 record.leader_id, members)
