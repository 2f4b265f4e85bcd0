"""The coordinator's durable state: an append-only log of transaction metadata.

``<data_dir>/.transactions/state.log`` plays the part of Kafka's ``__transaction_state``
topic. It is a :class:`~mirror.broker.coordinator_log.CoordinatorLog` (whose docstring has the
framing, the torn-tail rule, durability and why not Kafka's layout); each record is the
whole state of one transactional id after a transition, the last record of an id wins, and
replaying the file rebuilds the coordinator. A record's payload is UTF-8 JSON::

    {"id", "pid", "epoch", "timeout_ms", "state" (Kafka's state name), "update_ms",
     "prev_pid", "last_epoch", "partitions": [[topic, p], ...], "start_ms",
     "next_pid" (transactions v2's next producer id, -1 for none; absent in older logs)}
    {"id", "tombstone": true}        the id expired (Kafka's record with a null value)

Compaction: once the file holds :data:`COMPACT_SLACK` records more than there are ids, it
is rewritten with one record per id. Tombstones go then: with the records they cancel gone
too, there is nothing left for them to remove (Kafka keeps them ``delete.retention.ms`` for
readers of the topic; this file has no reader but the replay).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from ..coordinator_log import CoordinatorLog
from .metadata import NO_PRODUCER_ID, TxnMetadata, TxnState

__all__ = ["TransactionStateLog", "COMPACT_SLACK"]

COMPACT_SLACK = 1000
"""Records beyond one per id tolerated before a rewrite; bounds the file to O(ids) and the
rewrite cost to once per this many transitions."""


class TransactionStateLog:
    """Appends transaction metadata durably and replays it."""

    def __init__(self, directory: Path, *, flush: Literal["always", "os"] = "os"):
        self._file = CoordinatorLog(directory / "state.log", flush=flush)
        self._live: dict[str, TxnMetadata] = {}

    @property
    def path(self) -> Path:
        return self._file.path

    def load(self) -> dict[str, TxnMetadata]:
        """Replay the file (cutting off a torn tail); the latest state of every id."""
        for payload in self._file.load():
            fields = json.loads(payload)
            if fields.get("tombstone"):
                self._live.pop(fields["id"], None)
            else:
                self._live[fields["id"]] = _decode(fields)
        self._maybe_compact()
        return dict(self._live)

    def append(self, meta: TxnMetadata) -> None:
        """Persist one transition; only then may the coordinator act on it or answer."""
        self._file.append([_encode(meta)])
        self._live[meta.transactional_id] = meta
        self._maybe_compact()

    def remove(self, transactional_ids: list[str]) -> None:
        """Persist tombstones for these ids, in one write; only then may the coordinator forget them."""
        self._file.append([_tombstone(transactional_id) for transactional_id in transactional_ids])
        for transactional_id in transactional_ids:
            self._live.pop(transactional_id, None)
        self._maybe_compact()

    def close(self) -> None:
        self._file.close()

    def _maybe_compact(self) -> None:
        if self._file.records > len(self._live) + COMPACT_SLACK:
            self._file.compact([_encode(meta) for meta in self._live.values()])


def _encode(meta: TxnMetadata) -> bytes:
    return json.dumps({
        "id": meta.transactional_id, "pid": meta.producer_id, "epoch": meta.producer_epoch,
        "timeout_ms": meta.timeout_ms, "state": meta.state.kafka_name, "update_ms": meta.last_update_ms,
        "prev_pid": meta.previous_producer_id, "last_epoch": meta.last_producer_epoch,
        "partitions": sorted([topic, partition] for topic, partition in meta.partitions),
        "start_ms": meta.txn_start_ms, "next_pid": meta.next_producer_id,
    }, separators=(",", ":")).encode()


def _tombstone(transactional_id: str) -> bytes:
    return json.dumps({"id": transactional_id, "tombstone": True}, separators=(",", ":")).encode()


def _decode(fields: dict) -> TxnMetadata:
    return TxnMetadata(
        transactional_id=fields["id"], producer_id=fields["pid"], producer_epoch=fields["epoch"],
        timeout_ms=fields["timeout_ms"], state=TxnState.named(fields["state"]), last_update_ms=fields["update_ms"],
        previous_producer_id=fields["prev_pid"], last_producer_epoch=fields["last_epoch"],
        partitions=frozenset((topic, partition) for topic, partition in fields["partitions"]),
        txn_start_ms=fields["start_ms"],
        next_producer_id=fields.get("next_pid", NO_PRODUCER_ID),  # absent from logs written before transactions v2
    )
