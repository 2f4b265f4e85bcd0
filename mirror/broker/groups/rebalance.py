"""The classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the timers
behind them, as Kafka's ``GroupMetadataManager`` runs them for classic groups.

A rebalance has two phases. In the *join phase* (PreparingRebalance) every member must send
JoinGroup; the requests are parked until all known members have rejoined, or the rebalance
timeout (the longest of the members') has passed, after which the ones that did not are
removed. The group then moves to the next generation (CompletingRebalance) and every parked
JoinGroup is answered: the leader with all members' subscriptions, to run the assignor
itself. In the *sync phase* members send SyncGroup, parked until the leader's arrives with
the assignments, which are persisted and handed out (Stable). Members learn that a new
rebalance started from their Heartbeat (REBALANCE_IN_PROGRESS) and rejoin.

Timers (keyed, on the broker's Clock, see :class:`Timer`):

- ``("heartbeat", group, member)``: the session timeout; a member that lets it pass without
  a heartbeat (or an offset commit) is removed and the group rebalances. Members parked in a
  JoinGroup or SyncGroup are exempt, except new ones, whose first JoinGroup is bounded by
  ``new_member_join_timeout_ms`` (Kafka's 5 minutes);
- ``("join", group)``: the end of the join phase, the rebalance timeout; for a group's first
  rebalance, ``initial_rebalance_delay_ms`` at a time (``group.initial.rebalance.delay.ms``),
  extended while new members keep arriving, so that they join one generation together;
- ``("sync", group)``: members that do not send SyncGroup within the rebalance timeout are
  removed and the group rebalances.

Not implemented: static membership (KIP-345; ``group.instance.id`` is recorded and reported,
members are treated as dynamic), ``group.max.size``, and the new consumer protocol (KIP-848).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Callable

from ..errors import ApiError, kerr
from .api import UNKNOWN_MEMBER_ID, JoinRequest, JoinResult, SyncResult, settle
from .group import ClassicGroup, GroupState
from .member import Member
from .timer import Timer

__all__ = ["RebalanceProtocol", "GroupConfig"]

log = logging.getLogger(__name__)

_EMPTY, _PREPARING = GroupState.EMPTY, GroupState.PREPARING_REBALANCE
_COMPLETING, _STABLE, _DEAD = GroupState.COMPLETING_REBALANCE, GroupState.STABLE, GroupState.DEAD


@dataclass(frozen=True)
class GroupConfig:
    """The group coordinator's settings, Kafka's broker configs of the same meaning."""

    min_session_timeout_ms: int = 6_000
    """``group.min.session.timeout.ms``: shorter JoinGroup session timeouts get INVALID_SESSION_TIMEOUT."""
    max_session_timeout_ms: int = 1_800_000
    """``group.max.session.timeout.ms``."""
    initial_rebalance_delay_ms: int = 3_000
    """``group.initial.rebalance.delay.ms``: how long an empty group's first rebalance waits for more members."""
    new_member_join_timeout_ms: int = 300_000
    """How long a new member's first JoinGroup may stay parked (Kafka's fixed 5 minutes)."""
    offset_metadata_max_bytes: int = 4096
    """``offset.metadata.max.bytes``: longer commit metadata gets OFFSET_METADATA_TOO_LARGE."""
    tick_interval_ms: int = 100
    """How often the broker runs the coordinator's expired timers (Kafka's timer is exact)."""


class RebalanceProtocol:
    def __init__(self, groups: dict[str, ClassicGroup], timer: Timer, clock: Callable[[], int], config: GroupConfig,
                 persist: Callable[[ClassicGroup], None]):
        self.groups = groups
        self._timer = timer
        self._clock = clock
        self._config = config
        self._persist = persist  # the group's generation, members and assignments (raises OSError)

    # -- JoinGroup -----------------------------------------------------------------------------

    def join(self, request: JoinRequest, waiter: asyncio.Future) -> None:
        """Handle a JoinGroup; ``waiter`` gets its :class:`JoinResult`, now or once the join phase ends."""
        group = self.groups.get(request.group_id)
        if group is None and request.member_id != UNKNOWN_MEMBER_ID:
            settle(waiter, JoinResult(kerr.UnknownMemberIdError.errno, request.member_id))
            return
        group = group or ClassicGroup(request.group_id)  # created by its first member only
        error = self._join_error(group, request)
        if error:
            settle(waiter, JoinResult(error, request.member_id))
            return
        self.groups.setdefault(group.group_id, group)
        if request.member_id == UNKNOWN_MEMBER_ID:
            self._join_new_member(group, request, waiter)
        elif request.member_id in group.pending_members:
            self._add_member(group, request.member_id, request, waiter)
        else:
            self._join_existing_member(group, request, waiter)

    def _join_error(self, group: ClassicGroup, request: JoinRequest) -> int:
        if group.state is _DEAD:
            return kerr.CoordinatorNotAvailableError.errno
        if not group.supports_protocols(request.protocol_type, request.protocols):
            return kerr.InconsistentGroupProtocolError.errno
        return 0

    def _join_new_member(self, group: ClassicGroup, request: JoinRequest, waiter: asyncio.Future) -> None:
        member_id = group.new_member_id(request.client_id)
        if not request.requires_known_member_id:
            self._add_member(group, member_id, request, waiter)
            return
        # KIP-394: remember the id, expect the member back with it within its session timeout.
        group.pending_members.add(member_id)
        self._expire_heartbeat_in(group.group_id, member_id, request.session_timeout_ms)
        log.info("group %s: new member gets id %s and must rejoin with it", group.group_id, member_id)
        settle(waiter, JoinResult(kerr.MemberIdRequiredError.errno, member_id))

    def _join_existing_member(self, group: ClassicGroup, request: JoinRequest, waiter: asyncio.Future) -> None:
        try:
            member = group.validate_member(request.member_id)
        except ApiError as exc:
            settle(waiter, JoinResult(exc.code, request.member_id))
            return
        if group.state is _PREPARING:
            self._update_member(group, member, request, waiter, "rejoining during the join phase")
        elif member.protocols != request.protocols:
            self._update_member(group, member, request, waiter, "new metadata")
        elif group.state is _STABLE and group.is_leader(member.member_id):
            # The leader rejoins to have partitions reassigned: the topics changed, not its metadata.
            self._update_member(group, member, request, waiter, "the leader rejoining")
        else:
            # A follower of a Stable group with nothing new, or any member that missed its
            # JoinGroup answer in CompletingRebalance: the current generation again.
            settle(waiter, self._joined(group, member))

    def _add_member(self, group: ClassicGroup, member_id: str, request: JoinRequest, waiter: asyncio.Future) -> None:
        member = Member(member_id, request.instance_id, request.client_id, request.client_host,
                        request.session_timeout_ms, request.rebalance_timeout_ms, request.protocol_type,
                        request.protocols, join_waiter=waiter, is_new=True)
        if group.state is _PREPARING and group.previous_state is _EMPTY:
            group.new_member_added = True
        group.add(member)
        # A new member cannot heartbeat while its JoinGroup is parked, and a client that gave
        # up on it would leave a defunct member behind: bound the wait (Kafka does the same).
        self._expire_heartbeat_in(group.group_id, member_id, self._config.new_member_join_timeout_ms)
        self._rebalance_or_complete_join(group, f"member {member_id} joined")

    def _update_member(self, group: ClassicGroup, member: Member, request: JoinRequest, waiter: asyncio.Future,
                       reason: str) -> None:
        settle(member.join_waiter, JoinResult(kerr.RebalanceInProgressError.errno, member.member_id))  # a superseded retry
        member.protocols = request.protocols
        member.rebalance_timeout_ms, member.session_timeout_ms = request.rebalance_timeout_ms, request.session_timeout_ms
        member.join_waiter = waiter
        self._rebalance_or_complete_join(group, f"member {member.member_id}: {reason}")

    def _joined(self, group: ClassicGroup, member: Member) -> JoinResult:
        """The current generation as this member is told it; the leader also gets the members."""
        members = group.joined_members() if group.is_leader(member.member_id) else ()
        return JoinResult(0, member.member_id, group.generation, group.protocol_type, group.protocol_name,
                          group.leader_id or "", members)

    # -- the join phase ------------------------------------------------------------------------

    def _rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.state is _COMPLETING:
            self._propagate_assignment(group, kerr.RebalanceInProgressError.errno, reset=True)
        group.pending_sync.clear()
        self._timer.cancel(("sync", group.group_id))
        initial = group.is_empty
        group.transition_to(_PREPARING)
        log.info("group %s: preparing to rebalance from generation %d (%s)", group.group_id, group.generation, reason)
        if initial:
            # An empty group's first rebalance waits a little for the members starting with it.
            delay = self._config.initial_rebalance_delay_ms
            self._initial_join_in(group.group_id, delay, max(group.rebalance_timeout_ms - delay, 0))
        elif group.has_all_members_joined():
            self._complete_join(group)
        else:
            self._complete_join_in(group.group_id, group.rebalance_timeout_ms)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        """End the join phase if everyone has rejoined, unless it is a group's first, which ends
        at its initial delay (more members may be on their way)."""
        if group.state is _PREPARING and group.previous_state is not _EMPTY and group.has_all_members_joined():
            self._complete_join(group)

    def _initial_join_in(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        def expire() -> None:
            group = self.groups.get(group_id)
            if group is None or group.state is not _PREPARING:
                return
            if group.new_member_added and remaining_ms > 0:
                group.new_member_added = False
                self._initial_join_in(group_id, min(self._config.initial_rebalance_delay_ms, remaining_ms),
                                      max(remaining_ms - delay_ms, 0))
            else:
                self._complete_join(group)

        self._timer.schedule(("join", group_id), self._clock() + delay_ms, expire)

    def _complete_join_in(self, group_id: str, timeout_ms: int) -> None:
        def expire() -> None:
            group = self.groups.get(group_id)
            if group is not None and group.state is _PREPARING:
                self._complete_join(group)

        self._timer.schedule(("join", group_id), self._clock() + timeout_ms, expire)

    def _complete_join(self, group: ClassicGroup) -> None:
        """End the join phase: drop the members that did not rejoin, start the next generation
        and answer every parked JoinGroup (``completeClassicGroupJoin``)."""
        self._timer.cancel(("join", group.group_id))
        for missing in group.not_yet_rejoined():
            log.info("group %s: member %s did not rejoin in time; removing it", group.group_id, missing.member_id)
            self._drop(group, missing)
        group.init_next_generation()  # everyone left has rejoined, the leader too if it is still there
        if group.is_empty:
            log.info("group %s: generation %d is empty", group.group_id, group.generation)
            self._persist_quietly(group)
            return
        log.info("group %s: generation %d with %d members, leader %s, protocol %s", group.group_id,
                 group.generation, len(group.members), group.leader_id, group.protocol_name)
        for member in group.members.values():
            settle(member.join_waiter, self._joined(group, member))
            member.join_waiter = None
            member.is_new = False
            self.reschedule_heartbeat(group, member)
            group.pending_sync.add(member.member_id)
        self._expire_pending_sync_in(group.group_id, group.generation, group.rebalance_timeout_ms)

    # -- SyncGroup -----------------------------------------------------------------------------

    def sync(self, group_id: str, generation: int, member_id: str, protocol_type: str | None,
             protocol_name: str | None, assignments: dict[str, bytes], waiter: asyncio.Future) -> None:
        """Handle a SyncGroup; ``waiter`` gets its :class:`SyncResult` now or once the leader's arrives."""
        group = self.groups.get(group_id)
        if group is None or group.is_empty:
            settle(waiter, SyncResult(kerr.UnknownMemberIdError.errno))
            return
        try:
            member = self._check_sync(group, generation, member_id, protocol_type, protocol_name)
        except ApiError as exc:
            settle(waiter, SyncResult(exc.code))
            return
        if group.state is _PREPARING:
            settle(waiter, SyncResult(kerr.RebalanceInProgressError.errno))
        elif group.state is _STABLE:
            self._synced(group, member_id)
            settle(waiter, SyncResult(0, group.protocol_type, group.protocol_name, member.assignment))
        else:  # CompletingRebalance: park until the leader's assignments arrive
            settle(member.sync_waiter, SyncResult(kerr.RebalanceInProgressError.errno))  # a superseded retry
            member.sync_waiter = waiter
            self._synced(group, member_id)
            if group.is_leader(member_id):
                self._install_assignment(group, assignments)

    def _check_sync(self, group: ClassicGroup, generation: int, member_id: str, protocol_type: str | None,
                    protocol_name: str | None) -> Member:
        if group.state is _DEAD:
            raise ApiError(kerr.CoordinatorNotAvailableError, f"group {group.group_id!r} is being removed")
        member = group.validate_member(member_id)
        if generation != group.generation:
            raise ApiError(kerr.IllegalGenerationError, f"generation {generation} is not {group.generation}")
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            raise ApiError(kerr.InconsistentGroupProtocolError,
                           f"{protocol_type}/{protocol_name} is not the group's {group.protocol_type}/{group.protocol_name}")
        return member

    def _install_assignment(self, group: ClassicGroup, assignments: dict[str, bytes]) -> None:
        """The leader's assignments: persisted with the generation, then handed to every member."""
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        try:
            self._persist(group)
        except OSError as exc:
            log.error("group %s: assignment of generation %d not persisted: %s", group.group_id, group.generation, exc)
            self._propagate_assignment(group, kerr.NotCoordinatorError.errno, reset=True)
            self._rebalance_or_complete_join(group, "the assignment could not be persisted")
            return
        self._propagate_assignment(group, 0)
        group.transition_to(_STABLE)
        log.info("group %s: generation %d is stable", group.group_id, group.generation)

    def _propagate_assignment(self, group: ClassicGroup, error: int, *, reset: bool = False) -> None:
        for member in group.members.values():
            if reset:
                member.assignment = b""
            result = SyncResult(error, group.protocol_type, group.protocol_name, member.assignment) if not error \
                else SyncResult(error)
            if settle(member.sync_waiter, result):
                # Its session restarts now: an expiry noticed while it waited was ignored.
                self.reschedule_heartbeat(group, member)
            member.sync_waiter = None

    def _synced(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._timer.cancel(("sync", group.group_id))

    def _expire_pending_sync_in(self, group_id: str, generation: int, timeout_ms: int) -> None:
        def expire() -> None:
            group = self.groups.get(group_id)
            if group is None or group.generation != generation or not group.is_(_COMPLETING, _STABLE):
                return
            late = [group.members[member_id] for member_id in group.pending_sync]  # removed members are not pending
            if not late:
                return
            for member in late:
                log.info("group %s: member %s sent no SyncGroup in time; removing it", group_id, member.member_id)
                self._drop(group, member)
            self._prepare_rebalance(group, "members did not sync")

        self._timer.schedule(("sync", group_id), self._clock() + timeout_ms, expire)

    # -- Heartbeat, LeaveGroup -----------------------------------------------------------------

    def heartbeat(self, group_id: str, generation: int, member_id: str) -> None:
        """Keep the member's session alive; raises REBALANCE_IN_PROGRESS to make it rejoin."""
        group = self._group_of_member(group_id)
        if group.state is _DEAD:
            raise ApiError(kerr.CoordinatorNotAvailableError, f"group {group_id!r} is being removed")
        member = group.validate_member(member_id)
        if generation != group.generation:
            raise ApiError(kerr.IllegalGenerationError, f"generation {generation} is not {group.generation}")
        self.reschedule_heartbeat(group, member)
        if group.state is _PREPARING:
            raise ApiError(kerr.RebalanceInProgressError, f"group {group_id!r} is rebalancing: rejoin")

    def leave(self, group_id: str, member_ids: list[str]) -> list[int]:
        """Members leave (consumers closing, or an admin removing them); one error code per member."""
        group = self._group_of_member(group_id)
        if group.state is _DEAD:
            raise ApiError(kerr.CoordinatorNotAvailableError, f"group {group_id!r} is being removed")
        codes, left = [], []
        for member_id in member_ids:
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._timer.cancel(("heartbeat", group_id, member_id))
            elif member_id in group.members:
                self._drop(group, group.members[member_id])
            else:
                codes.append(kerr.UnknownMemberIdError.errno)
                continue
            codes.append(0)
            left.append(member_id)
        if left:
            log.info("group %s: %s left", group_id, ", ".join(left))
            self._rebalance_without(group, f"{', '.join(left)} left")
        return codes

    # -- sessions ------------------------------------------------------------------------------

    def reschedule_heartbeat(self, group: ClassicGroup, member: Member) -> None:
        self._expire_heartbeat_in(group.group_id, member.member_id, member.session_timeout_ms)

    def _expire_heartbeat_in(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        self._timer.schedule(("heartbeat", group_id, member_id), self._clock() + timeout_ms,
                             lambda: self._expire_heartbeat(group_id, member_id))

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.state is _DEAD:
            return
        if member_id in group.pending_members:
            log.info("group %s: member %s never came back with its id; forgetting it", group_id, member_id)
            group.pending_members.discard(member_id)
            self._maybe_complete_join_phase(group)  # it may be the one the join phase waited for
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("group %s: member %s missed its session timeout (%d ms); removing it",
                 group_id, member_id, member.session_timeout_ms)
        self._drop(group, member)
        self._rebalance_without(group, f"member {member_id}'s session expired")

    def _rebalance_without(self, group: ClassicGroup, reason: str) -> None:
        """Members are gone: a Stable or syncing group rebalances without them; a join phase
        ends if everyone still in the group has rejoined."""
        if group.is_(_STABLE, _COMPLETING):
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _drop(self, group: ClassicGroup, member: Member) -> None:
        """Remove a member; a request it has parked is answered UNKNOWN_MEMBER_ID (it must join anew)."""
        settle(member.join_waiter, JoinResult(kerr.UnknownMemberIdError.errno, UNKNOWN_MEMBER_ID))
        settle(member.sync_waiter, SyncResult(kerr.UnknownMemberIdError.errno))
        member.join_waiter = member.sync_waiter = None
        group.remove(member.member_id)
        self._timer.cancel(("heartbeat", group.group_id, member.member_id))

    # -- loading and unloading -------------------------------------------------------------

    def loaded(self, group: ClassicGroup) -> None:
        """A group replayed from the state log: its members' sessions start now (``onLoaded``)."""
        for member in group.members.values():
            self.reschedule_heartbeat(group, member)

    def unload(self) -> None:
        """The broker stops: every parked request is answered NOT_COORDINATOR (``onUnloaded``)."""
        for group in self.groups.values():
            for member in group.members.values():
                settle(member.join_waiter, JoinResult(kerr.NotCoordinatorError.errno, member.member_id))
                settle(member.sync_waiter, SyncResult(kerr.NotCoordinatorError.errno))
                member.join_waiter = member.sync_waiter = None
            group.transition_to(_DEAD)

    def _group_of_member(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            raise ApiError(kerr.UnknownMemberIdError, f"group {group_id!r} does not exist")
        return group

    def _persist_quietly(self, group: ClassicGroup) -> None:
        """An empty generation: if it is lost, the previous one comes back on load and its
        members expire then (Kafka only warns too)."""
        try:
            self._persist(group)
        except OSError as exc:
            log.warning("group %s: empty generation %d not persisted: %s", group.group_id, group.generation, exc)
