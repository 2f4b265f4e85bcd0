"""Interleaved, repeated timing: modes run A B A B ... and report medians.

Absolute times drift on shared machines; alternating the modes within one run exposes
them to the same drift, so their ratio is what we trust.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, TypeVar

T = TypeVar("T")


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


def rounds(modes: Mapping[str, Callable[[], T]], repeats: int, *, rotate: bool = False) -> Iterator[tuple[int, str, T]]:
    """Run every mode once per round, ``repeats`` rounds (A B A B ...); yield ``(round, mode, result)``
    as each run ends, so a caller can show progress and measure however it likes.

    ``rotate`` starts each round one mode later (A B C, B C A, C A B), for runs that leave work
    behind (a broker still writing back the last copy's pages): no mode then always follows
    the same one and pays for it.
    """
    names = list(modes)
    for round_ in range(repeats):
        shift = round_ % len(names) if rotate and names else 0
        for name in names[shift:] + names[:shift]:
            yield round_, name, modes[name]()


def interleaved(modes: Mapping[str, Callable[[], object]], repeats: int) -> dict[str, Timing]:
    """Run every mode once per round, ``repeats`` rounds, and keep each mode's medians."""
    walls: dict[str, list[float]] = {name: [] for name in modes}
    cpus: dict[str, list[float]] = {name: [] for name in modes}

    def timed(run: Callable[[], object]) -> Callable[[], tuple[float, float]]:
        def measure() -> tuple[float, float]:
            wall0, cpu0 = time.perf_counter(), time.process_time()
            run()
            return time.perf_counter() - wall0, time.process_time() - cpu0
        return measure

    for _, name, (wall, cpu) in rounds({name: timed(run) for name, run in modes.items()}, repeats):
        walls[name].append(wall)
        cpus[name].append(cpu)
    return {
        name: Timing(name, statistics.median(walls[name]), statistics.median(cpus[name]), repeats) for name in modes
    }


def ratio(fast: Timing, slow: Timing) -> float:
    """How many times faster ``fast`` ran than ``slow`` (same work assumed)."""
    return slow.wall_s / fast.wall_s if fast.wall_s > 0 else float("inf")
