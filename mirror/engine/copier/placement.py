"""Which resident copier follows which source partition, and what each is handed per lease.

A partition's copier is fixed for the run (two copiers must never copy one partition at once),
and a topic's partitions spread over all of them. Every copier that follows a known
partition gets a lease each time, with no range when the micro-batch has none for it: that
lease renews it, and collects what it copied since its last report.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ...kafka import TopicPartition
from ..ranges import CopyRequest

__all__ = ["Assignment", "copier_index", "assignments"]


@dataclass(frozen=True)
class Assignment:
    """What copier ``index`` is handed in one lease."""

    index: int
    requests: list[CopyRequest] = field(default_factory=list)


def copier_index(tp: TopicPartition, copiers: int) -> int:
    """The copier that follows ``tp``, among ``copiers``."""
    return (tp.partition + zlib.crc32(tp.topic.encode())) % copiers


def assignments(partitions: Mapping[str, int], requests: Iterable[CopyRequest], copiers: int) -> list[Assignment]:
    """Per copier, in index order, the ``requests`` of its partitions; every copier following
    one of ``partitions`` (source topic -> partition count) has one, if only to renew it."""
    chosen: dict[int, Assignment] = {}
    for topic, count in partitions.items():
        for partition in range(count):
            index = copier_index(TopicPartition(topic, partition), copiers)
            chosen.setdefault(index, Assignment(index))
    for request in requests:
        index = copier_index(request.tp, copiers)
        chosen.setdefault(index, Assignment(index)).requests.append(request)
    return [chosen[index] for index in sorted(chosen)]
