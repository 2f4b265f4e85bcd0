"""Which ranges of a micro-batch one Spark task copies together. Pure code.

A task copies its ranges with one Fetch per source leader and one Produce per destination
broker covering all of them (:func:`mirror.engine.copy_ranges`), so the fewer leaders a
task's ranges have, the fewer, larger requests it sends. Ranges are therefore grouped by
source leader first. Each leader gets a share of the ``tasks`` (the executor slots) in
proportion to its partitions, at least one, and its ranges are spread over its share by
size, largest first onto the least loaded (LPT scheduling), so the tasks finish together.
With more leaders than slots, there is one task per leader: a task never mixes leaders.
"""

from __future__ import annotations

from typing import Callable, Hashable, Sequence, TypeVar

__all__ = ["group_ranges"]

T = TypeVar("T")


def group_ranges(ranges: Sequence[T], leader_of: Callable[[T], Hashable], weight: Callable[[T], int],
                 tasks: int) -> list[list[T]]:
    """The ranges in groups: each group has one leader, about ``tasks`` groups in all."""
    if tasks < 1:
        raise ValueError(f"tasks must be at least 1, not {tasks}")
    by_leader: dict[Hashable, list[T]] = {}
    for item in ranges:
        by_leader.setdefault(leader_of(item), []).append(item)
    groups: list[list[T]] = []
    for items in by_leader.values():
        share = min(len(items), max(1, round(tasks * len(items) / len(ranges))))
        bins: list[list[T]] = [[] for _ in range(share)]
        loads = [0] * share
        for item in sorted(items, key=weight, reverse=True):
            lightest = loads.index(min(loads))
            bins[lightest].append(item)
            loads[lightest] += weight(item)
        groups.extend(bins)
    return groups
