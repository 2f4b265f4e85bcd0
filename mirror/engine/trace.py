"""A resident copier's latency trace: when each batch passed each stage of the copy, and every
stall of the copier's loop, for ``kmirror bench latency --trace`` (issue 49: see first, then
change the design).

Off unless the environment names a directory in :data:`TRACE_ENV` (the bench sets it for the
``kmirror run`` it starts; Spark hands the environment on to its Python workers and they to
their copiers). Then each copier process appends JSON lines to ``trace-<pid>.jsonl`` there:

- one per copied batch, written when its commit ends: ``{"b": [created, fetched, routed,
  sent, acked, commit_began, committed], "n": records}``, wall-clock seconds. ``created`` is
  the newest record's CreateTime (the batch's max timestamp), so every later stage is an upper
  bound of how long its newest record waited, and a lower bound for the older ones. ``sent``
  is the first Produce request that carried it (a retry is not a new send); ``committed`` is
  the EndTxn's answer (exactly-once) or the end of the flush (at-least-once);
- one per stall, a step of the loop that took longer than :data:`STALL_S`: ``{"s": kind,
  "at": start, "wall": seconds, "cpu": seconds of this thread's CPU, "held": records
  routed and not yet committed}``. A step whose CPU is far below its wall time while it does
  not wait on a socket is a pause of the process (CPU taken by others, a page fault storm);
  garbage collections are their own kind (``gc``).

When the variable is not set nothing here runs: the copy loop, the producer and the copier
check for a trace once per step, never per record.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import time
from pathlib import Path
from typing import Iterator, Sequence

from ..kafka import TopicPartition

__all__ = ["TRACE_ENV", "STALL_S", "CopierTrace"]

TRACE_ENV = "KMIRROR_TRACE"
STALL_S = 0.020
"""A step of the loop longer than this is a stall (issue 49's threshold)."""

_CREATED, _FETCHED, _ROUTED, _SENT, _ACKED = range(5)


class CopierTrace:
    """One copier's trace file and the batches in flight through it."""

    def __init__(self, path: Path):
        self._out = open(path, "a", buffering=1 << 16)
        self._fetched: dict[TopicPartition, float] = {}
        self._flying: dict[int, list[float]] = {}
        """id of an :class:`~.fetched_set.OutgoingBatch` -> its stage times, until acknowledged
        (the producer holds the batch until then, so its id stays its own)."""
        self._acked: list[tuple[list[float], int]] = []
        self._held = 0
        self._gc_began = 0.0
        gc.callbacks.append(self._on_gc)

    @classmethod
    def from_environment(cls) -> "CopierTrace | None":
        directory = os.environ.get(TRACE_ENV)
        if not directory:
            return None
        Path(directory).mkdir(parents=True, exist_ok=True)
        return cls(Path(directory) / f"trace-{os.getpid()}.jsonl")

    # ---- a batch's stages ------------------------------------------------------------------

    def fetched(self, tp: TopicPartition) -> None:
        """A fetch answered for ``tp``: the set it brought is routed before the next is asked for."""
        self._fetched[tp] = time.time()

    def routed(self, batch, source: TopicPartition) -> None:
        """``batch`` (an OutgoingBatch) was made from the set last fetched for ``source``."""
        created = batch.max_timestamp / 1000 if batch.max_timestamp >= 0 else math.nan
        self._flying[id(batch)] = [created, self._fetched.get(source, math.nan), time.time(), math.nan, batch.records]
        self._held += batch.records

    def sent(self, tokens: Sequence) -> None:
        """A Produce request went out with these batches (the first send of each counts)."""
        now = time.time()
        for token in tokens:
            stages = self._flying.get(id(token))
            if stages is not None and math.isnan(stages[_SENT]):
                stages[_SENT] = now

    def acked(self, batch) -> None:
        stages = self._flying.pop(id(batch), None)
        if stages is not None:
            records = int(stages.pop())
            stages.append(time.time())
            self._acked.append((stages, records))

    def committed(self, began: float, ended: float) -> None:
        """A commit (EndTxn, or a flush) that began and ended at these wall times made every
        batch acknowledged before it durable."""
        for stages, records in self._acked:
            self._out.write(json.dumps({"b": [*stages, began, ended], "n": records}) + "\n")
            self._held -= records
        self._acked = []

    # ---- the loop's steps ------------------------------------------------------------------

    @contextlib.contextmanager
    def step(self, kind: str) -> Iterator[None]:
        """Time one step of the loop; a stall (longer than :data:`STALL_S`) is written down."""
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            took = time.perf_counter() - wall
            if took > STALL_S:
                self._stall(kind, time.time() - took, took, time.thread_time() - cpu)

    def _stall(self, kind: str, at: float, wall: float, cpu: float) -> None:
        self._out.write(json.dumps({"s": kind, "at": at, "wall": wall, "cpu": cpu, "held": self._held}) + "\n")

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_began = time.perf_counter()
        elif self._gc_began:
            took = time.perf_counter() - self._gc_began
            if took > STALL_S:
                self._stall(f"gc (generation {info.get('generation')})", time.time() - took, took, took)

    def close(self) -> None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._on_gc)
        self._out.close()
