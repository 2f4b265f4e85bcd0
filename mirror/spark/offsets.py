"""The streaming source's offsets and how a micro-batch's end offsets are chosen. Pure code.

Spark checkpoints offsets as JSON, ``{"topic/partition": next_offset}``, one entry per source
partition: the same small map MirrorMaker 2 keeps per partition (``MirrorUtils.wrapOffset``),
and under :data:`TOPIC_IDS` each source topic's id as planned (:mod:`mirror.engine.topic_identity`):
a checkpoint written before ids has none, and gets them at its next trigger.
A micro-batch copies ``[start, end)`` of each partition; :func:`cap_end_offsets` shrinks the
ends to a rate limit, sharing it fairly between partitions (max-min fairness), so one busy
partition cannot starve the others.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..kafka.types import TopicPartition

__all__ = ["Offsets", "TOPIC_IDS", "REWOUND", "parse_offsets", "parse_topic_ids", "parse_rewound", "format_offsets",
           "cap_end_offsets", "Bounds"]

Offsets = dict[TopicPartition, int]
TOPIC_IDS = "@topic-ids"
"""The key of the topic ids: no "topic/partition" key, since a topic name has no '@'."""
REWOUND = "@rewound"
"""The key of the destination losses planned, ``{source topic: lost destination topic id}``
(:mod:`.rewinds`)."""


def parse_offsets(offsets: Mapping[str, object]) -> Offsets:
    return {TopicPartition.parse(key): int(value) for key, value in offsets.items() if not key.startswith("@")}


def parse_topic_ids(offsets: Mapping[str, object]) -> dict[str, str]:
    return dict(offsets.get(TOPIC_IDS) or {})


def parse_rewound(offsets: Mapping[str, object]) -> dict[str, str]:
    return dict(offsets.get(REWOUND) or {})


def format_offsets(offsets: Mapping[TopicPartition, int], topic_ids: Mapping[str, str] | None = None,
                   rewound: Mapping[str, str] | None = None) -> dict:
    formatted: dict = {str(tp): offsets[tp] for tp in sorted(offsets)}
    if topic_ids:
        formatted[TOPIC_IDS] = {topic: topic_ids[topic] for topic in sorted(topic_ids)}
    if rewound:
        formatted[REWOUND] = {topic: rewound[topic] for topic in sorted(rewound)}
    return formatted


def cap_end_offsets(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    *,
    max_records: int | None = None,
    max_bytes: int | None = None,
    bytes_per_offset: Mapping[TopicPartition, float] | None = None,
) -> Offsets:
    """End offsets for one micro-batch: ``latest``, cut down to the record and byte budgets.

    Bytes are estimated per partition with ``bytes_per_offset`` (from a small probe fetch), so
    ``max_bytes`` is approximate. When every share rounds down to nothing, the partition with the
    longest backlog still advances by one offset, so a batch larger than the budget is copied
    eventually rather than never.
    """
    backlog = {tp: max(0, end - start[tp]) for tp, end in latest.items() if tp in start}
    allowed = dict(backlog)
    if max_records is not None:
        allowed = _min(allowed, _fair_share(backlog, float(max_records), lambda tp: 1.0))
    if max_bytes is not None:
        cost = bytes_per_offset or {}
        allowed = _min(allowed, _fair_share(backlog, float(max_bytes), lambda tp: max(cost.get(tp, 1.0), 1e-9)))
    if backlog and not any(allowed.values()) and any(backlog.values()):
        busiest = max(backlog, key=lambda tp: (backlog[tp], tp))
        allowed[busiest] = 1
    ends = dict(latest)
    for tp, count in allowed.items():
        ends[tp] = start[tp] + count
    return ends


def _fair_share(backlog: Mapping[TopicPartition, int], budget: float, cost) -> dict[TopicPartition, int]:
    """Water-filling: partitions needing less than an equal share get all they need; the rest split what is left."""
    share: dict[TopicPartition, int] = {}
    pending = sorted((tp for tp in backlog if backlog[tp]), key=lambda tp: backlog[tp] * cost(tp))
    while pending:
        equal = budget / len(pending)
        tp = pending.pop(0)
        need = backlog[tp] * cost(tp)
        granted = min(backlog[tp], int(min(need, equal) / cost(tp)))
        share[tp] = granted
        budget -= granted * cost(tp)
    return {tp: share.get(tp, 0) for tp in backlog}


def _min(a: Mapping[TopicPartition, int], b: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    return {tp: min(a[tp], b[tp]) for tp in a}


Spans = Mapping[TopicPartition, tuple[tuple[int, int], ...]]


@dataclass(frozen=True)
class Bounds:
    """What the plan never copies of a partition, checkpoint or not: what lies below its start,
    and the spans it skips. A takeover's starts are where MM2 stopped; a failback's, B's
    promotion points; after a failback, A's; a failback skips the spans of B that a
    reconcile copied there from A (:mod:`mirror.engine.failback`). A micro-batch never spans
    a skipped span: it ends where one begins, and the next begins where it ends."""

    starts: Offsets = field(default_factory=dict)
    skips: Spans = field(default_factory=dict)
    """Per partition, ``[first, end)`` spans in order, none overlapping."""

    def past(self, offsets: Mapping[TopicPartition, int]) -> Offsets:
        """``offsets``, each moved up to its partition's start and out of any skipped span."""
        out = {}
        for tp, offset in offsets.items():
            offset = max(offset, self.starts.get(tp, offset))
            for first, end in self.skips.get(tp, ()):
                if first <= offset < end:
                    offset = end
            out[tp] = offset
        return out

    def cut(self, begun: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int]) -> Offsets:
        """``ends``, each no further than the next skipped span after ``begun`` (which is past them)."""
        out = dict(ends)
        for tp, end in ends.items():
            start = begun.get(tp)
            if start is None:
                continue
            ahead = [first for first, _ in self.skips.get(tp, ()) if first >= start]
            if ahead:
                out[tp] = max(start, min(end, ahead[0]))
        return out

    def floor(self, tp: TopicPartition, offset: int) -> int:
        """The highest bound at or below ``offset`` (its start, or a skipped span's end): no
        record below it is copied, not even of the batch that holds it; -1: none."""
        return max([self.starts.get(tp, -1), *(end for _, end in self.skips.get(tp, ()) if end <= offset)])

    def without(self, topics: Iterable[str]) -> "Bounds":
        """These bounds, none of ``topics`` (made again: their offsets mean nothing in the new topic)."""
        gone = set(topics)
        return Bounds({tp: o for tp, o in self.starts.items() if tp.topic not in gone},
                      {tp: s for tp, s in self.skips.items() if tp.topic not in gone})

    def encode(self) -> str:
        return json.dumps({"starts": format_offsets(self.starts),
                           "skips": {str(tp): [list(span) for span in spans] for tp, spans in sorted(self.skips.items())}})

    @classmethod
    def decode(cls, text: str) -> "Bounds":
        value = json.loads(text)
        return cls(parse_offsets(value["starts"]),
                   {TopicPartition.parse(key): tuple((int(f), int(e)) for f, e in spans)
                    for key, spans in value["skips"].items()})
