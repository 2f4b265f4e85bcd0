"""What the group coordinator takes and gives, whatever the wire version (the handlers map
request and response versions onto these)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

__all__ = ["JoinRequest", "JoinResult", "JoinedMember", "SyncResult", "MemberDescription", "GroupDescription",
           "ListedGroup", "UNKNOWN_MEMBER_ID", "NO_GENERATION", "settle"]

UNKNOWN_MEMBER_ID = ""
"""The member id of a consumer that has not joined yet (Kafka's ``JoinGroupRequest.UNKNOWN_MEMBER_ID``)."""
NO_GENERATION = -1
"""No generation: in a JoinGroup refusal, and in commits from outside group management
(assign() consumers, admins)."""

Protocols = tuple[tuple[str, bytes], ...]
"""A member's supported protocols, ``(name, metadata)`` in its order of preference (for a
consumer: its assignors, each with the subscription it implies)."""


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    requires_known_member_id: bool
    """JoinGroup v4+ (KIP-394): a new member first gets MEMBER_ID_REQUIRED and its id."""


@dataclass(frozen=True)
class JoinedMember:
    """One member as the leader sees it in the JoinGroup answer: the input of its assignor."""

    member_id: str
    instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    error: int
    member_id: str
    generation: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str
    """The chosen protocol (the assignor), only while the group is Stable, as Kafka reports it."""
    members: tuple[MemberDescription, ...]


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


def settle(waiter: asyncio.Future | None, result) -> bool:
    """Answer a long-polling JoinGroup or SyncGroup, unless its request is gone (cancelled at
    shutdown); whether it was waiting."""
    if waiter is None or waiter.done():
        return False
    waiter.set_result(result)
    return True
