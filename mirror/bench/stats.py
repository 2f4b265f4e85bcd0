"""Numbers of ``kmirror bench mirror``: samples, medians, ratios against the targets, the JSON.

Pure code. Units are decimal: MB = 10**6 bytes, GB = 10**9 bytes. Throughput and CPU per GB
are per byte of *data* (record keys and values, uncompressed); ``wire`` throughput counts the
source batches as stored, compressed.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import math
import os
import platform
import statistics
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Iterable, Sequence

__all__ = ["percentile", "Sample", "Scenario", "ModeResult", "Measure", "Target", "Ratio", "TARGETS",
           "TARGET_SCENARIOS", "summarise", "ratios", "RUN_COPY_TARGET", "RunCopyRatio", "run_copy_ratios", "SMALL_BATCH_TARGETS", "SmallBatchRatio",
           "small_batch_ratios", "machine_info", "to_json"]

MB = 10**6
GB = 10**9

BASELINE = "pass-through"


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0-1) by the nearest rank, of sorted ``values``: the smallest value
    with at least ``q`` of them at or below it (the ``ceil(q * n)``-th)."""
    if not values:
        return float("nan")
    rank = math.ceil(q * len(values) - 1e-9)  # 0.99 * 100 is 99.00000000000001 in floats
    return values[min(len(values) - 1, max(0, rank - 1))]


@dataclass(frozen=True)
class Sample:
    """One run of one mode, measured inside the process that copied (or its process tree)."""

    wall_s: float
    cpu_s: float
    peak_rss_bytes: int
    routes: dict[str, int] = field(default_factory=dict)
    """Source records per routing class (copy-engine modes only)."""
    profile: str = ""
    copy_s: float | None = None
    """The Spark mode only: ``kmirror run``'s own seconds of copying, as its summary gives them
    (its ``foreachBatch`` calls), where ``wall_s`` times the whole query."""
    start_s: float | None = None
    """Modes that run a mirror process of their own (MirrorMaker 2, ``kmirror run``), whose
    ``wall_s`` runs from the first record copied to the last: from the process's start to the
    last record, its start-up (a JVM, Connect, Spark) included."""


@dataclass(frozen=True)
class Scenario:
    """What one source topic is like; every result, ratio, JSON record and plot panel names it."""

    codec: str
    record_bytes: int
    batch_bytes: int
    """The stored size source batches are filled to: the producer's ``batch.size`` (see :mod:`.datagen`)."""
    partitions: int


@dataclass(frozen=True)
class ModeResult:
    """The medians of one mode in one scenario."""

    mode: str
    scenario: Scenario
    records: int
    batches: int
    """Source batches copied."""
    payload_bytes: int
    wire_bytes: int
    wall_s: float
    cpu_s: float
    peak_rss_bytes: int
    repeats: int
    walls: tuple[float, ...] = ()
    """Wall seconds of each round, in round order (for paired ratios)."""
    cpus: tuple[float, ...] = ()
    """CPU seconds of each round, in round order."""
    copy_walls: tuple[float, ...] = ()
    """The Spark mode: ``kmirror run``'s seconds of copying in each round (:attr:`Sample.copy_s`)."""
    start_walls: tuple[float, ...] = ()
    """Mirror processes: seconds from their start to the last record, each round (:attr:`Sample.start_s`)."""

    @property
    def copy_s(self) -> float | None:
        return statistics.median(self.copy_walls) if self.copy_walls else None

    @property
    def start_s(self) -> float | None:
        return statistics.median(self.start_walls) if self.start_walls else None

    @property
    def mb_per_s(self) -> float:
        return self.payload_bytes / MB / self.wall_s

    @property
    def wire_mb_per_s(self) -> float:
        return self.wire_bytes / MB / self.wall_s

    @property
    def records_per_s(self) -> float:
        return self.records / self.wall_s

    @property
    def batches_per_s(self) -> float:
        """Per-batch costs (a CRC check, header patches, a share of a request) show here first."""
        return self.batches / self.wall_s

    @property
    def mean_batch_bytes(self) -> float:
        """The stored size the source batches came out at, against ``scenario.batch_bytes`` asked."""
        return self.wire_bytes / self.batches

    @property
    def cpu_s_per_gb(self) -> float:
        return self.cpu_s / (self.payload_bytes / GB)

    @property
    def peak_rss_mb(self) -> float:
        return self.peak_rss_bytes / MB

    def as_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode, **asdict(self.scenario), "mean_batch_bytes": round(self.mean_batch_bytes, 1),
            "mb_per_s": round(self.mb_per_s, 3), "wire_mb_per_s": round(self.wire_mb_per_s, 3),
            "batches_per_s": round(self.batches_per_s, 1), "records_per_s": round(self.records_per_s, 1),
            "cpu_s_per_gb": round(self.cpu_s_per_gb, 3), "peak_rss_mb": round(self.peak_rss_mb, 1),
            "records": self.records, "batches": self.batches, "payload_bytes": self.payload_bytes,
            "wire_bytes": self.wire_bytes, "wall_s": round(self.wall_s, 4), "cpu_s": round(self.cpu_s, 4),
            "repeats": self.repeats, "walls_s": [round(w, 4) for w in self.walls],
            "cpus_s": [round(c, 4) for c in self.cpus],
            **({"copy_s": round(self.copy_s, 4), "copy_walls_s": [round(c, 4) for c in self.copy_walls]}
               if self.copy_s is not None else {}),
            **({"start_to_end_s": round(self.start_s, 4), "start_to_end_walls_s": [round(w, 4) for w in self.start_walls]}
               if self.start_s is not None else {}),
        }


def summarise(mode: str, scenario: Scenario, records: int, batches: int, payload_bytes: int, wire_bytes: int,
              samples: Sequence[Sample]) -> ModeResult:
    """Each measure's median over the samples (taken separately: the medians of a mode's runs)."""
    if not samples:
        raise ValueError(f"no samples for mode {mode}")
    return ModeResult(mode, scenario, records, batches, payload_bytes, wire_bytes,
                      statistics.median(s.wall_s for s in samples), statistics.median(s.cpu_s for s in samples),
                      int(statistics.median(s.peak_rss_bytes for s in samples)), len(samples),
                      tuple(s.wall_s for s in samples), tuple(s.cpu_s for s in samples),
                      tuple(s.copy_s for s in samples if s.copy_s is not None),
                      tuple(s.start_s for s in samples if s.start_s is not None))


class Measure(str, Enum):
    """What a target bounds."""

    THROUGHPUT = "MB/s"
    """Pass-through's MB/s over the other mode's: at least the bound."""
    CPU = "CPU s/GB"
    """Pass-through's CPU s/GB as a fraction of the other mode's: at most the bound."""


@dataclass(frozen=True)
class Target:
    """One bound on pass-through against another mode."""

    versus: str
    measure: Measure
    bound: float

    def value(self, ratio: Ratio) -> float:
        return ratio.throughput if self.measure is Measure.THROUGHPUT else ratio.cpu

    def met(self, ratio: Ratio) -> bool:
        value = self.value(ratio)
        return value >= self.bound if self.measure is Measure.THROUGHPUT else value <= self.bound


TARGETS = (
    Target("raw", Measure.THROUGHPUT, 0.9),
    Target("confluent-kafka", Measure.THROUGHPUT, 2.0),
    Target("confluent-kafka", Measure.CPU, 0.2),
)
"""The issue's targets ("Data plane at Kafka-client speed"): pass-through at 0.9x raw or more,
at 2x the confluent-kafka loop's MB/s or more, on 1/5 of its CPU s/GB or less."""

TARGET_SCENARIOS = frozenset(Scenario(codec, 1024, 16 * 1024, 4) for codec in ("lz4", "zstd"))
"""Where the issue sets the targets: the Java producer's default 16 KiB batches, the common
codecs, 1 KiB records, 4 partitions. Other scenarios are held to the same bounds for comparison."""


@dataclass(frozen=True)
class Ratio:
    """Pass-through against one other mode in one scenario."""

    scenario: Scenario
    versus: str
    throughput: float
    """Pass-through MB/s divided by the other mode's."""
    cpu: float
    """Pass-through CPU s/GB divided by the other mode's: 0.2 means it uses a fifth."""

    @property
    def targets(self) -> tuple[Target, ...]:
        return tuple(target for target in TARGETS if target.versus == self.versus)

    @property
    def met(self) -> bool | None:
        """Whether every target against this mode holds; None when there is none."""
        return all(target.met(self) for target in self.targets) if self.targets else None

    def as_json(self) -> dict[str, Any]:
        return {
            **asdict(self.scenario), "baseline": BASELINE, "versus": self.versus,
            "throughput_ratio": round(self.throughput, 3), "cpu_fraction": round(self.cpu, 3),
            "targets": [{"measure": t.measure.value, "bound": t.bound, "met": t.met(self)} for t in self.targets],
            "met": self.met, "target_scenario": self.scenario in TARGET_SCENARIOS,
        }


def _paired(upper: ModeResult, uppers: Sequence[float], lower: ModeResult, lowers: Sequence[float],
            overall: float) -> float:
    """The median over rounds of ``upper``'s seconds per byte of its data over ``lower``'s, or
    ``overall`` without a round-by-round record. Pairing runs of one round cancels the drift the
    rounds share (a busy neighbour slows both), which a ratio of medians from different rounds keeps."""
    if not uppers or len(uppers) != len(lowers) or min(lowers) <= 0:
        return overall
    scale = lower.payload_bytes / upper.payload_bytes
    return statistics.median(u / v * scale for u, v in zip(uppers, lowers))


def ratios(results: Iterable[ModeResult]) -> list[Ratio]:
    """Pass-through against every other mode, scenario by scenario (scenarios without it are skipped),
    each the median of the round-by-round ratios."""
    by_scenario: dict[Scenario, dict[str, ModeResult]] = {}
    for result in results:
        by_scenario.setdefault(result.scenario, {})[result.mode] = result
    out = []
    for scenario, modes in by_scenario.items():
        base = modes.get(BASELINE)
        if base is None:
            continue
        for mode, other in modes.items():
            if mode != BASELINE:
                cpu = base.cpu_s_per_gb / other.cpu_s_per_gb if other.cpu_s > 0 else float("inf")
                throughput = _paired(other, other.walls, base, base.walls, base.mb_per_s / other.mb_per_s)
                out.append(Ratio(scenario, mode, throughput, _paired(base, base.cpus, other, other.cpus, cpu)))
    return out


RUN_COPY_TARGET = 0.8
"""Issue 9: ``kmirror run``'s copy rate (its summary's seconds of copying) at least 0.8x pass-through's."""


@dataclass(frozen=True)
class RunCopyRatio:
    """``kmirror run``'s copy rate against pass-through in one scenario (the Spark mode's rounds)."""

    scenario: Scenario
    copy: float
    """The run's rate over its seconds of copying, divided by pass-through's: the issue's measure."""
    query: float
    """The same over the whole query's seconds (planning, micro-batches, commits): what a run takes."""

    @property
    def met(self) -> bool:
        return self.copy >= RUN_COPY_TARGET

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self.scenario), "copy_ratio": round(self.copy, 3), "query_ratio": round(self.query, 3),
                "bound": RUN_COPY_TARGET, "met": self.met}


def run_copy_ratios(results: Iterable[ModeResult]) -> list[RunCopyRatio]:
    """Per scenario that ran both pass-through and a mode with seconds of copying (the Spark
    mode), the medians of the round-by-round ratios of their rates."""
    by_scenario: dict[Scenario, list[ModeResult]] = {}
    for result in results:
        by_scenario.setdefault(result.scenario, []).append(result)
    out = []
    for scenario, modes in by_scenario.items():
        base = next((m for m in modes if m.mode == BASELINE), None)
        for run in (m for m in modes if m.copy_s and base is not None):
            copy_rate = run.payload_bytes / MB / run.copy_s
            out.append(RunCopyRatio(scenario, _paired(base, base.walls, run, run.copy_walls, copy_rate / base.mb_per_s),
                                    _paired(base, base.walls, run, run.walls, run.mb_per_s / base.mb_per_s)))
    return out


COALESCED = "coalesced"
LOOP = "confluent-kafka"
SMALL_BATCH_TARGETS = {2 * 1024: (2.0, 0.5), 4 * 1024: (2.5, None)}
"""Issue 40, by source batch size: coalesced's MB/s over the confluent-kafka loop's at least the
first figure, its CPU s/GB over the loop's at most the second (None: no bound)."""


class _Bounded:
    """A ratio held to a target: ``bounds`` are a least MB/s ratio and a most CPU s/GB one (None:
    no bound), or None where the target does not apply."""

    throughput: float
    cpu: float

    @property
    def bounds(self) -> tuple[float, float | None] | None:
        raise NotImplementedError

    @property
    def met(self) -> bool | None:
        if self.bounds is None:
            return None
        throughput, cpu = self.bounds
        return self.throughput >= throughput and (cpu is None or self.cpu <= cpu)


@dataclass(frozen=True)
class SmallBatchRatio(_Bounded):
    """The coalesced copy against the confluent-kafka loop, and against pass-through, in one scenario."""

    scenario: Scenario
    throughput: float
    """Coalesced MB/s over the loop's."""
    cpu: float
    """Coalesced CPU s/GB over the loop's: 0.5 means half."""
    over_pass_through: float | None
    """Coalesced MB/s over pass-through's (None: pass-through did not run)."""

    @property
    def bounds(self) -> tuple[float, float | None] | None:
        if self.scenario.record_bytes != 1024 or self.scenario.codec not in ("lz4", "zstd"):
            return None
        return SMALL_BATCH_TARGETS.get(self.scenario.batch_bytes)

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self.scenario), "versus": LOOP, "throughput_ratio": round(self.throughput, 3),
                "cpu_fraction": round(self.cpu, 3),
                "over_pass_through": None if self.over_pass_through is None else round(self.over_pass_through, 3),
                "bounds": self.bounds, "met": self.met}


def small_batch_ratios(results: Iterable[ModeResult]) -> list[SmallBatchRatio]:
    """Per scenario that ran both the coalesced copy and the confluent-kafka loop, the medians of
    the round-by-round ratios (as :func:`ratios`)."""
    by_scenario: dict[Scenario, dict[str, ModeResult]] = {}
    for result in results:
        by_scenario.setdefault(result.scenario, {})[result.mode] = result
    out = []
    for scenario, modes in by_scenario.items():
        ours, loop, base = modes.get(COALESCED), modes.get(LOOP), modes.get(BASELINE)
        if ours is None or loop is None:
            continue
        cpu = ours.cpu_s_per_gb / loop.cpu_s_per_gb if loop.cpu_s > 0 else float("inf")
        out.append(SmallBatchRatio(
            scenario, _paired(loop, loop.walls, ours, ours.walls, ours.mb_per_s / loop.mb_per_s),
            _paired(ours, ours.cpus, loop, loop.cpus, cpu),
            None if base is None else _paired(base, base.walls, ours, ours.walls, ours.mb_per_s / base.mb_per_s)))
    return out


PEER_PAIRS = (("kmirror-run", "mirrormaker2"), ("kmirror-run-eos", "mirrormaker2-eos"))
"""The long-running job against MirrorMaker 2 at the same guarantee (issue 35)."""
PEER_TARGETS = {"kmirror-run": (3.0, 0.2), "kmirror-run-eos": (3.0, None)}
"""Issue 35, at 16 KiB batches of 1 KiB lz4 and zstd records: MB/s at least the first figure
times MirrorMaker 2's, CPU s/GB at most the second times its (None: no bound)."""


@dataclass(frozen=True)
class PeerRatio(_Bounded):
    """``kmirror run`` against MirrorMaker 2 at one guarantee, in one scenario."""

    scenario: Scenario
    ours: str
    peer: str
    throughput: float
    """Our MB/s over MirrorMaker 2's."""
    cpu: float
    """Our CPU s/GB over MirrorMaker 2's: 0.2 means a fifth."""

    @property
    def bounds(self) -> tuple[float, float | None] | None:
        if (self.scenario.record_bytes, self.scenario.batch_bytes) != (1024, 16 * 1024) or \
                self.scenario.codec not in ("lz4", "zstd"):
            return None
        return PEER_TARGETS.get(self.ours)

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self.scenario), "mode": self.ours, "versus": self.peer,
                "throughput_ratio": round(self.throughput, 3), "cpu_fraction": round(self.cpu, 3),
                "bounds": self.bounds, "met": self.met}


def peer_ratios(results: Iterable[ModeResult]) -> list[PeerRatio]:
    """Per scenario and guarantee where both ran, ``kmirror run`` against MirrorMaker 2: the
    medians of the round-by-round ratios (as :func:`ratios`)."""
    by_scenario: dict[Scenario, dict[str, ModeResult]] = {}
    for result in results:
        by_scenario.setdefault(result.scenario, {})[result.mode] = result
    out = []
    for scenario, modes in by_scenario.items():
        for ours_name, peer_name in PEER_PAIRS:
            ours, peer = modes.get(ours_name), modes.get(peer_name)
            if ours is None or peer is None:
                continue
            cpu = ours.cpu_s_per_gb / peer.cpu_s_per_gb if peer.cpu_s > 0 else float("inf")
            out.append(PeerRatio(scenario, ours_name, peer_name,
                                 _paired(peer, peer.walls, ours, ours.walls, ours.mb_per_s / peer.mb_per_s),
                                 _paired(ours, ours.cpus, peer, peer.cpus, cpu)))
    return out


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """Where the numbers come from; absolute numbers mean little without it."""
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "versions": {name: _version(name) for name in ("kmirror", "kafka-python", "confluent-kafka", "pyspark")},
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def to_json(results: Sequence[ModeResult], parameters: dict[str, Any], machine: dict[str, Any]) -> dict[str, Any]:
    """The ``--json`` document: ``results`` (issue 5's minimum shape, plus the scenario and raw totals), ``ratios``,
    the ``parameters`` that made them and the ``machine``."""
    return {
        "results": [result.as_json() for result in results],
        "ratios": [ratio.as_json() for ratio in ratios(results)],
        "run_copy_ratios": [ratio.as_json() for ratio in run_copy_ratios(results)],
        "peer_ratios": [ratio.as_json() for ratio in peer_ratios(results)],
        "small_batch_ratios": [ratio.as_json() for ratio in small_batch_ratios(results)],
        "parameters": parameters,
        "machine": machine,
    }
