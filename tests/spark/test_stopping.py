"""The job's one way to stop, without Spark: the planner's stop file first, the query stopped
only once its running micro-batch is over. (tests/spark/test_stop.py stops ``kmirror run``.)"""

from __future__ import annotations

import threading

import pytest

from mirror.spark.stopping import Stopper


class FakeQuery:
    """A streaming query whose micro-batch runs for ``trigger_polls`` more looks at its status."""

    def __init__(self, stopper: Stopper, *, trigger_polls: int = 0, error: str | None = None):
        self.stopper = stopper
        self.trigger_polls = trigger_polls
        self.error = error
        self.isActive = error is None
        self.events: list[str] = []

    @property
    def status(self) -> dict:
        self.trigger_polls -= 1
        if self.trigger_polls < 0:
            self.events.append(f"trigger over, stop file {'there' if self.stopper.file.exists() else 'missing'}")
        return {"isTriggerActive": self.trigger_polls >= 0}

    def awaitTermination(self, seconds: float) -> None:
        self.events.append("awaited")

    def stop(self) -> None:
        self.events.append("stopped")
        self.isActive = False

    def exception(self):
        return self.error


def test_a_stop_tells_the_planner_then_stops_the_query_once_its_micro_batch_is_over(tmp_path):
    requested = threading.Event()
    stopper = Stopper(requested, tmp_path / "stop")
    query = FakeQuery(stopper, trigger_polls=3)
    requested.set()
    stopper.watch(query)
    assert query.events == ["trigger over, stop file there", "stopped"]


def test_without_a_stop_the_query_is_awaited_and_its_failure_raised(tmp_path):
    stopper = Stopper(threading.Event(), tmp_path / "stop")
    with pytest.raises(RuntimeError, match="the planner failed"):
        stopper.watch(FakeQuery(stopper, error="the planner failed"))
    assert not stopper.file.exists() and not stopper.requested


def test_a_wait_ends_when_a_stop_is_requested(tmp_path):
    requested = threading.Event()
    stopper = Stopper(requested, tmp_path / "stop")
    assert stopper.wait(0.01) is False
    requested.set()
    assert stopper.wait(60) is True and stopper.requested
