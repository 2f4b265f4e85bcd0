"""Which query failures the job rides out by starting the query again, and how often."""

from __future__ import annotations

from mirror.spark.restarts import QueryRestarts


def test_restarts_are_limited_within_a_window_and_free_again_after_it():
    now = [0.0]
    restarts = QueryRestarts(limit=2, window_s=600, clock=lambda: now[0])
    assert restarts.allow()
    now[0] = 300
    assert restarts.allow()
    now[0] = 599
    assert not restarts.allow()
    now[0] = 601  # the first one left the window, the second not
    assert restarts.allow()
    assert not restarts.allow()
    assert restarts.count == 3
