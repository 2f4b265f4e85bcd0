"""Where the group coordinator's state is persisted and replayed from:
``<data_dir>/.groups/state.log``, a :class:`~mirror.broker.coordinator_log.CoordinatorLog` (whose
docstring has the framing), instead of Kafka's compacted ``__consumer_offsets`` topic,
which one node does not need.

Each record's payload is one JSON object, what Kafka's ``__consumer_offsets`` keys and values hold::

    {"t": "offset", "g": group, "topic": t, "p": partition, "o": offset, "e": leader_epoch,
     "m": metadata, "ts": commit_ms, "pid": producer_id}     OffsetCommitKey/Value; pid -1 = committed,
                                                            else pending in that producer's transaction
    {"t": "txn-end", "pid": producer_id, "commit": bool}    the transaction marker on __consumer_offsets
    {"t": "group", "g": group, "gen": generation, "type": protocol_type, "protocol": name,
     "leader": member_id, "members": [{"id", "instance", "client", "host", "session_ms",
     "rebalance_ms", "subscription" (base64), "assignment" (base64)}]}
                                                            GroupMetadataKey/Value, at each generation
    {"t": "group-deleted", "g": group}                      DeleteGroups: the group and all its offsets
    {"t": "topic-deleted", "topic": t}                      DeleteTopics: every group's offsets of the
                                                            topic (Kafka's onPartitionsDeleted tombstones)

Replay applies them in order; the last word on a key wins. A commit is persisted before it
is applied or answered. Compaction rewrites the file as the live state (one record per
group, per committed offset, per pending offset, in commit order) once it holds
:data:`COMPACT_SLACK` more records than that.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal, Union

from ..coordinator_log import CoordinatorLog

__all__ = ["GroupStateLog", "OffsetRecord", "TxnEndRecord", "GroupRecord", "MemberRecord", "GroupDeletedRecord",
           "TopicDeletedRecord", "Record", "COMPACT_SLACK"]

COMPACT_SLACK = 1000
"""Records beyond the live state tolerated before a rewrite: bounds the file to O(live state)
and the rewrite cost to once per this many commits."""

NOT_TRANSACTIONAL = -1


@dataclass(frozen=True)
class OffsetRecord:
    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_ms: int
    producer_id: int = NOT_TRANSACTIONAL


@dataclass(frozen=True)
class TxnEndRecord:
    producer_id: int
    commit: bool


@dataclass(frozen=True)
class MemberRecord:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    subscription: bytes
    """The member's metadata for the group's protocol (Kafka keeps only that one, too)."""
    assignment: bytes


@dataclass(frozen=True)
class GroupRecord:
    group_id: str
    generation: int
    protocol_type: str | None
    protocol_name: str | None
    leader_id: str | None
    members: tuple[MemberRecord, ...]


@dataclass(frozen=True)
class GroupDeletedRecord:
    group_id: str


@dataclass(frozen=True)
class TopicDeletedRecord:
    topic: str


Record = Union[OffsetRecord, TxnEndRecord, GroupRecord, GroupDeletedRecord, TopicDeletedRecord]


class GroupStateLog:
    def __init__(self, directory: Path, *, flush: Literal["always", "os"] = "os"):
        self._file = CoordinatorLog(directory / "state.log", flush=flush)
        self._compact_at = COMPACT_SLACK

    @property
    def path(self) -> Path:
        return self._file.path

    def load(self) -> list[Record]:
        records = [_decode(payload) for payload in self._file.load()]
        self._compact_at = self._file.records + COMPACT_SLACK
        return records

    def append(self, records: list[Record]) -> None:
        """Persist records in one write; only then may the coordinator apply them or answer."""
        self._file.append([_encode(record) for record in records])

    def maybe_compact(self, live: Callable[[], list[Record]]) -> None:
        """Rewrite the file as ``live()`` once it has grown :data:`COMPACT_SLACK` records past it."""
        if self._file.records < self._compact_at:
            return
        state = live()
        if self._file.records > len(state) + COMPACT_SLACK:
            self._file.compact([_encode(record) for record in state])
        self._compact_at = self._file.records + COMPACT_SLACK

    def close(self) -> None:
        self._file.close()


def _encode(record: Record) -> bytes:
    if isinstance(record, OffsetRecord):
        fields = {"t": "offset", "g": record.group_id, "topic": record.topic, "p": record.partition, "o": record.offset,
                  "e": record.leader_epoch, "m": record.metadata, "ts": record.commit_ms, "pid": record.producer_id}
    elif isinstance(record, TxnEndRecord):
        fields = {"t": "txn-end", "pid": record.producer_id, "commit": record.commit}
    elif isinstance(record, GroupRecord):
        fields = {"t": "group", "g": record.group_id, "gen": record.generation, "type": record.protocol_type,
                  "protocol": record.protocol_name, "leader": record.leader_id,
                  "members": [_encode_member(member) for member in record.members]}
    elif isinstance(record, TopicDeletedRecord):
        fields = {"t": "topic-deleted", "topic": record.topic}
    else:
        fields = {"t": "group-deleted", "g": record.group_id}
    return json.dumps(fields, separators=(",", ":")).encode()


def _decode(payload: bytes) -> Record:
    fields = json.loads(payload)
    kind = fields["t"]
    if kind == "offset":
        return OffsetRecord(fields["g"], fields["topic"], fields["p"], fields["o"], fields["e"], fields["m"],
                            fields["ts"], fields["pid"])
    if kind == "txn-end":
        return TxnEndRecord(fields["pid"], fields["commit"])
    if kind == "group":
        return GroupRecord(fields["g"], fields["gen"], fields["type"], fields["protocol"], fields["leader"],
                           tuple(_decode_member(member) for member in fields["members"]))
    if kind == "group-deleted":
        return GroupDeletedRecord(fields["g"])
    if kind == "topic-deleted":
        return TopicDeletedRecord(fields["topic"])
    raise ValueError(f"unknown group state record type {kind!r}")


def _encode_member(member: MemberRecord) -> dict:
    return {"id": member.member_id, "instance": member.instance_id, "client": member.client_id,
            "host": member.client_host, "session_ms": member.session_timeout_ms,
            "rebalance_ms": member.rebalance_timeout_ms,
            "subscription": base64.b64encode(member.subscription).decode(),
            "assignment": base64.b64encode(member.assignment).decode()}


def _decode_member(fields: dict) -> MemberRecord:
    return MemberRecord(fields["id"], fields["instance"], fields["client"], fields["host"], fields["session_ms"],
                        fields["rebalance_ms"], base64.b64decode(fields["subscription"]),
                        base64.b64decode(fields["assignment"]))
