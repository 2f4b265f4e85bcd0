"""Numbers of ``kmirror bench mirror``: samples, medians, ratios against the targets, the JSON.

Pure code. Units are decimal: MB = 10**6 bytes, GB = 10**9 bytes. Throughput and CPU per GB
are per byte of *data* (record keys and values, uncompressed); ``wire`` throughput counts the
source batches as stored, compressed.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

__all__ = ["Sample", "ModeResult", "Ratio", "TARGETS", "summarise", "ratios", "machine_info", "to_json"]

MB = 10**6
GB = 10**9

BASELINE = "pass-through"


@dataclass(frozen=True)
class Sample:
    """One run of one mode, measured inside the process that copied (or its process tree)."""

    wall_s: float
    cpu_s: float
    peak_rss_bytes: int
    routes: dict[str, int] = field(default_factory=dict)
    """Source records per routing class (copy-engine modes only)."""
    profile: str = ""


@dataclass(frozen=True)
class ModeResult:
    """The medians of one mode in one scenario (codec x record size)."""

    mode: str
    codec: str
    record_bytes: int
    records: int
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
    def cpu_s_per_gb(self) -> float:
        return self.cpu_s / (self.payload_bytes / GB)

    @property
    def peak_rss_mb(self) -> float:
        return self.peak_rss_bytes / MB

    def as_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode, "codec": self.codec, "record_bytes": self.record_bytes,
            "mb_per_s": round(self.mb_per_s, 3), "wire_mb_per_s": round(self.wire_mb_per_s, 3),
            "records_per_s": round(self.records_per_s, 1), "cpu_s_per_gb": round(self.cpu_s_per_gb, 3),
            "peak_rss_mb": round(self.peak_rss_mb, 1), "records": self.records, "payload_bytes": self.payload_bytes,
            "wire_bytes": self.wire_bytes, "wall_s": round(self.wall_s, 4), "cpu_s": round(self.cpu_s, 4),
            "repeats": self.repeats, "walls_s": [round(w, 4) for w in self.walls],
            "cpus_s": [round(c, 4) for c in self.cpus],
        }


def summarise(mode: str, codec: str, record_bytes: int, records: int, payload_bytes: int, wire_bytes: int,
              samples: Sequence[Sample]) -> ModeResult:
    """Each measure's median over the samples (taken separately: the medians of a mode's runs)."""
    if not samples:
        raise ValueError(f"no samples for mode {mode}")
    return ModeResult(mode, codec, record_bytes, records, payload_bytes, wire_bytes,
                      statistics.median(s.wall_s for s in samples), statistics.median(s.cpu_s for s in samples),
                      int(statistics.median(s.peak_rss_bytes for s in samples)), len(samples),
                      tuple(s.wall_s for s in samples), tuple(s.cpu_s for s in samples))


@dataclass(frozen=True)
class Target:
    """Pass-through must be ``throughput`` times the other mode's MB/s or more, and (when set)
    use at most ``1 / cpu`` of its CPU seconds per GB."""

    throughput: float
    cpu: float | None = None


TARGETS: dict[str, dict[str, Target]] = {
    "raw": {codec: Target(0.9) for codec in ("none", "gzip", "snappy", "lz4", "zstd")},
    "recompress": {"gzip": Target(10), "zstd": Target(10), "lz4": Target(3)},
    "confluent-kafka": {codec: Target(3, cpu=5) for codec in ("none", "gzip", "snappy", "lz4", "zstd")},
}
"""Issue 5's targets, by compared mode and codec; a pair not listed has no target."""


@dataclass(frozen=True)
class Ratio:
    """Pass-through against one other mode in one scenario."""

    codec: str
    record_bytes: int
    versus: str
    throughput: float
    """Pass-through MB/s divided by the other mode's."""
    cpu: float
    """The other mode's CPU s/GB divided by pass-through's: 5 means pass-through uses 1/5."""
    target: Target | None

    @property
    def met(self) -> bool | None:
        """Whether every part of the target holds; None when there is no target."""
        if self.target is None:
            return None
        return self.throughput >= self.target.throughput and (self.target.cpu is None or self.cpu >= self.target.cpu)

    def as_json(self) -> dict[str, Any]:
        return {
            "codec": self.codec, "record_bytes": self.record_bytes, "baseline": BASELINE, "versus": self.versus,
            "throughput_ratio": round(self.throughput, 3), "cpu_ratio": round(self.cpu, 3),
            "target": None if self.target is None else asdict(self.target), "met": self.met,
        }


def _paired(base: ModeResult, other: ModeResult, ours: Sequence[float], theirs: Sequence[float], overall: float) -> float:
    """The median over rounds of ``theirs / ours`` per byte of each mode's data, or ``overall``
    without a round-by-round record. Pairing runs of one round cancels the drift the rounds
    share (a busy neighbour slows both), which a ratio of medians from different rounds keeps."""
    if not ours or len(ours) != len(theirs) or min(ours) <= 0:
        return overall
    scale = base.payload_bytes / other.payload_bytes
    return statistics.median(t / o * scale for o, t in zip(ours, theirs))


def ratios(results: Iterable[ModeResult]) -> list[Ratio]:
    """Pass-through against every other mode, scenario by scenario (scenarios without it are skipped),
    each the median of the round-by-round ratios."""
    by_scenario: dict[tuple[str, int], dict[str, ModeResult]] = {}
    for result in results:
        by_scenario.setdefault((result.codec, result.record_bytes), {})[result.mode] = result
    out = []
    for (codec, record_bytes), modes in by_scenario.items():
        base = modes.get(BASELINE)
        if base is None:
            continue
        for mode, other in modes.items():
            if mode != BASELINE:
                cpu = other.cpu_s_per_gb / base.cpu_s_per_gb if base.cpu_s > 0 else float("inf")
                out.append(Ratio(codec, record_bytes, mode,
                                 _paired(base, other, base.walls, other.walls, base.mb_per_s / other.mb_per_s),
                                 _paired(base, other, base.cpus, other.cpus, cpu), TARGETS.get(mode, {}).get(codec)))
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
    """The ``--json`` document: ``results`` (issue 5's minimum shape, plus raw totals), ``ratios``,
    the ``parameters`` that made them and the ``machine``."""
    return {
        "results": [result.as_json() for result in results],
        "ratios": [ratio.as_json() for ratio in ratios(results)],
        "parameters": parameters,
        "machine": machine,
    }
