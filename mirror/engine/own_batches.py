"""How many of kmirror's own records (commits, offset syncs, provenance) go in one batch.

A broker refuses a batch over its ``message.max.bytes`` (1 MiB by default) with
MESSAGE_SIZE_TOO_LARGE. kmirror's own records are 100-300 bytes each, and a copy task commits
a record per partition it copies: 6,700 partitions' commits in one batch passed the limit (a
whole cluster of 20,000 partitions on three tasks). A thousand records a batch stays under a
third of it, however many partitions a job follows, and writes the same records: several
batches of one partition in one transaction or one produce request are as atomic as one.
"""

from __future__ import annotations

from typing import Iterator, Sequence, TypeVar

__all__ = ["RECORDS_PER_BATCH", "chunks"]

T = TypeVar("T")

RECORDS_PER_BATCH = 1000


def chunks(items: Sequence[T], size: int = RECORDS_PER_BATCH) -> Iterator[Sequence[T]]:
    """``items`` in order, at most ``size`` at a time."""
    for i in range(0, len(items), size):
        yield items[i:i + size]
