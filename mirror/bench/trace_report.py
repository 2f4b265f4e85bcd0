"""The copiers' latency trace (:mod:`mirror.engine.trace`) read back: how long a batch took to
reach each stage of the copy, and what the copiers' loops stalled on.

Only batches created in the measured window count, as the latency bench's records do. Stage
times are measured from the batch's newest record's CreateTime (see :mod:`~mirror.engine.trace`);
each step is the time from the stage before. Stalls are every step of a loop longer than
20 ms, by kind, with the records they held (routed and not yet committed) and how many were
pauses of the process: a step that waits on no socket (routing, reading answers, lease
messages) whose thread got less than half of its wall time as CPU.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from .stats import percentile

__all__ = ["TraceReport", "read_trace", "STAGES"]

STAGES = ("fetched", "routed", "produce sent", "produce acked", "commit began", "committed")
"""After ``created``, in the order a batch passes them (see :mod:`mirror.engine.trace`)."""

_ON_SOCKETS = ("wait for the source", "wait for produce acks", "flush", "commit")
"""Steps that wait for a broker's answer: their wall time is not the process's to explain."""


@dataclass
class Stall:
    """The stalls of one kind of step."""

    kind: str
    walls: list[float] = field(default_factory=list)
    """Each one's wall time, in seconds."""
    holding: int = 0
    """Of them, stalls while records were routed and not yet committed."""
    pauses: int = 0

    @property
    def count(self) -> int:
        return len(self.walls)

    @property
    def total_s(self) -> float:
        return sum(self.walls)

    @property
    def max_s(self) -> float:
        return max(self.walls, default=0.0)


@dataclass
class TraceReport:
    batches: int
    records: int
    since_created: dict[str, list[float]]
    """Stage -> p50, p90, p99, max in ms since the batch's newest record was created."""
    steps: dict[str, list[float]]
    """Stage -> p50, p90, p99, max in ms since the stage before."""
    stalls: list[Stall] = field(default_factory=list)
    seconds: float = 0.0

    def text(self) -> str:
        lines = [f"trace: {self.batches:,} batches, {self.records:,} records created in the measured window",
                 "| stage | since created p50 / p90 / p99 / max ms | step p50 / p90 / p99 / max ms |",
                 "|---|--:|--:|"]
        for stage in STAGES:
            lines.append(f"| {stage} | {_four(self.since_created[stage])} | {_four(self.steps[stage])} |")
        lines += ["", f"stalls over 20 ms in {self.seconds:.0f} s (a wait while records are held delays them):",
                  "| step | count | holding records | pauses | total s | max ms |", "|---|--:|--:|--:|--:|--:|"]
        for stall in sorted(self.stalls, key=lambda s: -s.total_s):
            lines.append(f"| {stall.kind} | {stall.count} | {stall.holding} | {stall.pauses} | {stall.total_s:.2f} | "
                         f"{stall.max_s * 1000:.0f} |")
        return "\n".join(lines)


def _four(values: list[float]) -> str:
    return " / ".join("-" if math.isnan(v) else f"{v:.1f}" for v in values)


def _quantiles(values: list[float]) -> list[float]:
    """p50, p90, p99 and max of seconds, in ms (stages a batch never reached left out)."""
    values = sorted(v for v in values if not math.isnan(v))
    return [percentile(values, q) * 1000 for q in (0.5, 0.9, 0.99, 1.0)]


def read_trace(directory: Path, since: float, until: float) -> TraceReport:
    """Every copier's trace file under ``directory``, for batches created from ``since`` to
    ``until`` (wall-clock seconds) and stalls that began then."""
    since_created: dict[str, list[float]] = {stage: [] for stage in STAGES}
    steps: dict[str, list[float]] = {stage: [] for stage in STAGES}
    stalls: dict[str, Stall] = {}
    batches = records = 0
    for path in sorted(directory.glob("trace-*.jsonl")):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if "b" in entry:
                created, *later = entry["b"]
                if not since <= created < until:
                    continue
                batches += 1
                records += entry["n"]
                before = created
                for stage, at in zip(STAGES, later):
                    since_created[stage].append(at - created)
                    steps[stage].append(at - before)
                    before = at
            elif since <= entry["at"] < until:
                kind = entry["s"]
                stall = stalls.setdefault(kind, Stall(kind))
                stall.walls.append(entry["wall"])
                stall.holding += entry["held"] > 0
                stall.pauses += kind not in _ON_SOCKETS and entry["cpu"] < entry["wall"] / 2
    return TraceReport(batches, records, {s: _quantiles(v) for s, v in since_created.items()},
                       {s: _quantiles(v) for s, v in steps.items()}, list(stalls.values()), until - since)
