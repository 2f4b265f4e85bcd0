"""What the mirror asks of consumer-group coordinators: which groups exist, what they committed,
whether anyone is in them, and committing offsets on a group's behalf (as MirrorMaker 2's
checkpoint task does, through Kafka's admin client).

Each group has a coordinator, the broker FindCoordinator (key type 0) names. ListGroups goes
to every broker, since each lists only the groups it coordinates. Commits are made as a
client outside the group (generation -1, no member id), which Kafka accepts for a group with
no members; a group with members refuses them, and the mirror does not try (MirrorMaker 2's
rule, :mod:`mirror.engine.group_sync`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, TypeVar

import kafka.errors as kerr
from kafka.protocol.admin.groups import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetFetchRequest

from .client import KafkaClient
from .coordinators import GROUP, Coordinator
from .errors import BrokerApiError
from .types import TopicPartition

__all__ = ["GroupAdmin", "GroupDescription", "EMPTY_STATES"]

EMPTY_STATES = frozenset({"Empty", "Dead"})
"""Group states with no member (Kafka's ``GroupState``); the others have members."""
_NO_OFFSET = -1
T = TypeVar("T")


@dataclass(frozen=True)
class GroupDescription:
    group: str
    state: str
    members: int

    @property
    def active(self) -> bool:
        """Someone is in the group: committing for it would fight its members."""
        return self.members > 0 or self.state not in EMPTY_STATES


class GroupAdmin:
    """Group look-ups and commits against one cluster, retried under the client's policy."""

    def __init__(self, client: KafkaClient):
        self._client = client
        self._coordinators: dict[str, Coordinator] = {}

    def list_groups(self) -> list[str]:
        """Every group the cluster's brokers coordinate."""
        def attempt() -> list[str]:
            found: set[str] = set()
            for address in self._client.brokers().values():
                response = self._client.call(ListGroupsRequest(states_filter=[], types_filter=[]), address=address)
                _check("ListGroups", response.error_code, "(all)")
                found.update(group.group_id for group in response.groups)
            return sorted(found)

        return self._client.retrying("list consumer groups", attempt)

    def committed(self, group: str) -> dict[TopicPartition, int]:
        """The group's committed offsets, every partition it has one for."""
        def read(response) -> dict[TopicPartition, int]:
            _check("OffsetFetch", getattr(response, "error_code", 0), group)
            offsets = {}
            for topic in response.topics:
                for part in topic.partitions:
                    _check("OffsetFetch", part.error_code, group)
                    if part.committed_offset != _NO_OFFSET:
                        offsets[TopicPartition(topic.name, part.partition_index)] = part.committed_offset
            return offsets

        request = OffsetFetchRequest(group_id=group, topics=None, require_stable=True)
        return self._coordinated(group, request, read, f"fetch the committed offsets of group {group}")

    def describe(self, group: str) -> GroupDescription:
        def read(response) -> GroupDescription:
            (found,) = response.groups
            if found.error_code == kerr.GroupIdNotFoundError.errno:  # DescribeGroups v6+ (KIP-1043)
                return GroupDescription(group, "Dead", 0)
            _check("DescribeGroups", found.error_code, group)
            return GroupDescription(group, found.group_state, len(found.members))

        request = DescribeGroupsRequest(groups=[group], include_authorized_operations=False)
        return self._coordinated(group, request, read, f"describe group {group}")

    def commit(self, group: str, offsets: Mapping[TopicPartition, int], metadata: str = "") -> None:
        """Commit ``offsets`` for ``group`` from outside it (generation -1, no member)."""
        def read(response) -> None:
            for topic in response.topics:
                for part in topic.partitions:
                    _check("OffsetCommit", part.error_code, group)

        topic_class = OffsetCommitRequest.OffsetCommitRequestTopic
        by_topic: dict[str, list] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(topic_class.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=offset, committed_leader_epoch=-1,
                commit_timestamp=-1, committed_metadata=metadata))
        request = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                      group_instance_id=None, retention_time_ms=-1,
                                      topics=[topic_class(name=t, partitions=ps) for t, ps in by_topic.items()])
        if offsets:
            self._coordinated(group, request, read, f"commit offsets for group {group}")

    def _coordinated(self, group: str, request, read: Callable[[Any], T], what: str) -> T:
        """``request`` at the group's coordinator, its answer ``read``, under the retry policy."""
        coordinator = self._coordinators.setdefault(group, Coordinator(self._client, group, GROUP))
        return self._client.retrying(what, lambda: coordinator.call(request, read))


def _check(api: str, code: int, group: str) -> None:
    if code:
        raise BrokerApiError.from_code(api, code, detail=f"group {group}")
