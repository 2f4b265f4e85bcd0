"""``--once`` succeeds only when every selected partition was copied to its end.

The end is each partition's last stable offset when the job started (what a read_committed
consumer could read then), read by the driver before the query starts; where the query got
to is the source offsets of its last committed micro-batch (the checkpoint). A partition whose
copy stopped short, or that the plan never reached, is named: a one-shot copy of a cluster
that exits 0 having copied half of it is worse than one that fails.

The planner pins its own targets a moment later, so they are at or past these ends: a copy
that reached the planner's targets passes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from kcodecs import KMirrorError

from ..engine import TopicRoute
from ..listing import some_of
from ..kafka import READ_COMMITTED, KafkaClient, TopicPartition
from .offsets import Offsets, parse_offsets
from .pyspark_internals import checkpoint_started, committed_source_offsets

__all__ = ["IncompleteCopyError", "ends_at_start", "check_copied"]

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Short:
    """A partition the copy did not take to its end: where it got to (None: never planned)."""

    tp: TopicPartition
    reached: int | None
    end: int

    def __str__(self) -> str:
        return f"{self.tp} (never planned, end {self.end})" if self.reached is None else \
            f"{self.tp} at {self.reached} of {self.end}"


class IncompleteCopyError(KMirrorError):
    """``--once`` ended with partitions not copied to the ends they had when it started."""

    def __init__(self, short: list[Short]):
        self.short = short
        topics = sorted({s.tp.topic for s in short})
        named = some_of(short)
        super().__init__(f"--once ended with {len(short)} partition{'s' if len(short) > 1 else ''} of "
                         f"{len(topics)} topic{'s' if len(topics) > 1 else ''} not copied to their end: {named}")


def ends_at_start(source: KafkaClient, routes: Mapping[str, TopicRoute]) -> Offsets:
    """Every routed source partition's last stable offset, now."""
    partitions = [TopicPartition(topic, p) for topic, route in sorted(routes.items())
                  for p in range(route.source_partitions)]
    return source.list_offsets(partitions, "latest", isolation_level=READ_COMMITTED) if partitions else {}


def check_copied(ends: Offsets, checkpoint: Path) -> None:
    """Raise :class:`IncompleteCopyError` unless the checkpoint's last committed micro-batch
    reached ``ends`` in every partition. A query that planned no micro-batch at all found
    nothing to copy from where the job starts (``starting_offsets`` latest, or a run after
    one that copied everything): the planner starts every partition it sees in its first one."""
    committed = committed_source_offsets(checkpoint)
    if committed is None and not checkpoint_started(checkpoint):
        log.info("--once: nothing to copy in the %d selected partitions from where the job starts", len(ends))
        return
    reached = parse_offsets(committed) if committed is not None else {}
    short = [Short(tp, reached.get(tp), end) for tp, end in sorted(ends.items())
             if end > 0 and reached.get(tp, -1) < end]
    if short:
        raise IncompleteCopyError(short)
    log.info("--once: every one of the %d selected partitions copied to its end", len(ends))
