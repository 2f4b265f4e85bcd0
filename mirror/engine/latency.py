"""A small fixed-bucket histogram of replication latency, filled on executors, merged on the driver.

Replication latency is the time a record became visible to the destination's consumers minus
the source batch's max timestamp (``Batch.max_timestamp``): how long after a record was
stamped at the source a consumer could read it at the destination. At-least-once that is the
destination's acknowledgement of the batch; exactly-once it is the commit of the transaction
that holds it, as a read_committed consumer sees nothing before (:class:`Invisible` keeps the
acknowledged batches' timestamps until then). A copy task observes one value per produced
batch (no per-record work), into :data:`BUCKETS`; the counts travel back to the driver in
:class:`~mirror.engine.copy.TaskStats` and are added up there, so the Prometheus histogram
(:mod:`mirror.metrics`) shows exactly what the tasks counted.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

__all__ = ["LatencyHistogram", "Invisible", "BUCKETS"]

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
"""Upper bounds in seconds: Prometheus' default buckets, extended to an hour for a mirror
catching up on a backlog (its latency is the age of the backlog)."""


def _zeros() -> list[int]:
    return [0] * (len(BUCKETS) + 1)


@dataclass
class LatencyHistogram:
    """Counts per bucket (not cumulative; the last one is ``+Inf``), their sum and count."""

    counts: list[int] = field(default_factory=_zeros)
    sum: float = 0.0

    @property
    def count(self) -> int:
        return sum(self.counts)

    def observe(self, seconds: float) -> None:
        # A source clock ahead of the destination's makes latency negative: count it as 0.
        seconds = max(0.0, seconds)
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.sum += seconds

    def merge(self, other: LatencyHistogram) -> None:
        """Add ``other``'s counts (another task's) into these."""
        for i, n in enumerate(other.counts):
            self.counts[i] += n
        self.sum += other.sum

    def cumulative(self) -> list[tuple[str, int]]:
        """``[(le, count of values <= le), ..., ("+Inf", total)]``, as Prometheus exposes buckets."""
        running, out = 0, []
        for bound, n in zip((*map(str, BUCKETS), "+Inf"), self.counts):
            running += n
            out.append((bound, running))
        return out


@dataclass
class Invisible:
    """The newest source timestamps (seconds) of batches acknowledged in a transaction not yet
    committed: their latency is counted at the commit, when consumers can read them."""

    newest: list[float] = field(default_factory=list)

    def add(self, seconds: float) -> None:
        self.newest.append(seconds)

    def visible(self, at: float, into: LatencyHistogram) -> None:
        """The transaction committed at ``at``: count each batch's latency ``into``."""
        for seconds in self.newest:
            into.observe(at - seconds)
        self.newest.clear()
