"""One member of a classic group (Kafka's ``ClassicGroupMember``).

Mutable on purpose: a member carries the JoinGroup or SyncGroup request it has parked
(an asyncio future the coordinator settles when the rebalance moves on), and its timeouts
and protocols change when it rejoins.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from .api import MemberDescription, Protocols

__all__ = ["Member"]


@dataclass(eq=False)
class Member:
    member_id: str
    instance_id: str | None
    """``group.instance.id``, kept and reported; members are all treated as dynamic (no KIP-345)."""
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_waiter: asyncio.Future | None = None
    sync_waiter: asyncio.Future | None = None
    is_new: bool = False
    """Joined but never completed a join phase: it may be expired while its JoinGroup waits."""

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        return next((metadata for name, metadata in self.protocols if name == protocol), b"")

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        return next(name for name in self.protocol_names if name in candidates)

    def has_satisfied_heartbeat(self) -> bool:
        """Kafka's rule: a member parked in JoinGroup or SyncGroup needs no heartbeat, unless it
        is new (a new member's parked JoinGroup must not keep a vanished client forever)."""
        return not self.is_new and (self.awaiting_join or self.awaiting_sync)

    def describe(self, protocol: str | None) -> MemberDescription:
        """What DescribeGroups reports; the subscription only once a protocol is chosen."""
        return MemberDescription(self.member_id, self.instance_id, self.client_id, self.client_host,
                                 self.metadata(protocol) if protocol is not None else b"", self.assignment)
