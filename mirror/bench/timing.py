"""Interleaved, repeated timing: modes run A B A B ... and report medians.

Absolute times drift on shared machines; alternating the modes within one run exposes
them to the same drift, so their ratio is what we trust.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Mapping


@dataclass(frozen=True)
class Timing:
    """Median wall and CPU seconds of one mode over its repeats."""

    name: str
    wall_s: float
    cpu_s: float
    repeats: int

    def rate(self, amount: float) -> float:
        """``amount`` per wall-clock second (e.g. bytes/s)."""
        return amount / self.wall_s if self.wall_s > 0 else float("inf")


def interleaved(modes: Mapping[str, Callable[[], object]], repeats: int) -> dict[str, Timing]:
    """Run every mode once per round, ``repeats`` rounds, and keep each mode's medians."""
    walls: dict[str, list[float]] = {name: [] for name in modes}
    cpus: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(repeats):
        for name, run in modes.items():
            wall0, cpu0 = time.perf_counter(), time.process_time()
            run()
            walls[name].append(time.perf_counter() - wall0)
            cpus[name].append(time.process_time() - cpu0)
    return {
        name: Timing(name, statistics.median(walls[name]), statistics.median(cpus[name]), repeats) for name in modes
    }


def ratio(fast: Timing, slow: Timing) -> float:
    """How many times faster ``fast`` ran than ``slow`` (same work assumed)."""
    return slow.wall_s / fast.wall_s if fast.wall_s > 0 else float("inf")
