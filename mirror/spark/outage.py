"""Waiting out an outage of a cluster: pause, retry with capped exponential backoff, log one
line per step, go on when the cluster answers again, give up after ``max_outage_s``.

The copy tasks' own retries are bounded (``[limits.retry]``, seconds), as Kafka's clients' are per
request; a long-running mirror must outlast a broker restart or a network partition of
minutes, as MirrorMaker 2's tasks do. So the job's two Kafka-facing loops wait here: the
driver's micro-batch (its copy tasks and its destination-topic check, see
:mod:`mirror.spark.job`) and the planner's metadata and ListOffsets calls
(:mod:`mirror.spark.source`). Re-running a micro-batch's copy is the replay that the
delivery guarantees already cover: under exactly-once a task attempt skips what the
destination committed, under at-least-once it may copy a range again but never skips one.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from kcodecs import KMirrorError

from ..engine.failures import verdict

__all__ = ["Outage", "OutageInterrupted", "Retries", "ride_out", "is_outage", "MISSING_TRIES", "INITIAL_BACKOFF_S", "MAX_BACKOFF_S"]

log = logging.getLogger(__name__)

T = TypeVar("T")

INITIAL_BACKOFF_S = 1.0
MAX_BACKOFF_S = 15.0
"""Cap on one wait: how late, at most, the job notices that a cluster is back."""


class OutageInterrupted(KMirrorError):
    """A stop was requested while the job waited for a cluster; the unfinished work is redone
    on restart (from the checkpoint)."""


@dataclass
class Outage:
    """One outage, from the first failed try to the next success: how long it has lasted and
    how long to wait before the next try."""

    limit_s: float = math.inf
    """Give up once the outage has lasted this long."""
    clock: Callable[[], float] = time.monotonic
    began: float | None = None
    steps: int = 0

    def next_wait(self, what: str, since: float) -> float | None:
        """Count one more failed try, begun at ``since`` (``what`` names the cluster and the
        error); log one line and return the seconds to wait before the next, or None once the
        outage outlasted the limit. The first try's start dates the outage: a try fails only
        after its own retries ran out, seconds after the cluster went away."""
        now = self.clock()
        if self.began is None:
            self.began = since
        down = now - self.began
        if down >= self.limit_s:
            log.error("%s; down for %.0f s, longer than max_outage_s (%g s): giving up", what, down, self.limit_s)
            return None
        delay = min(INITIAL_BACKOFF_S * 2 ** self.steps, MAX_BACKOFF_S, self.limit_s - down)
        self.steps += 1
        log.warning("%s; down for %.0f s, retrying in %.0f s", what, down, delay)
        return delay

    def pause(self, what: str, since: float, sleep: Callable[[float], bool]) -> bool:
        """Count one more failed try, begun at ``since`` (:meth:`next_wait`), and wait before the
        next: True to try again, False once the outage outlasted the limit.
        ``sleep(seconds)`` returns False when a stop was requested meanwhile:
        :class:`OutageInterrupted`."""
        delay = self.next_wait(what, since=since)
        if delay is None:
            return False
        if not sleep(delay):
            raise OutageInterrupted(f"stopped while waiting out an outage ({what})")
        return True

    def ended(self) -> None:
        """The try after a failure worked."""
        if self.began is not None:
            log.info("back after an outage of %.0f s; going on", self.clock() - self.began)
        self.began, self.steps = None, 0


MISSING_TRIES = 3
"""Calls made again at once after a topic went missing during one (:class:`Retries`)."""


def is_outage(error: KMirrorError) -> bool:
    return verdict(error) == "outage"


class Retries:
    """One call's retries, as the driver makes them: a topic missing (deleted between two of the
    call's requests) is no outage, and the call is made again at once, up to
    :data:`MISSING_TRIES` times, and listed again; an outage is waited out (:meth:`Outage.pause`);
    any other error is not retried."""

    def __init__(self, outage: Outage, sleep: Callable[[float], bool],
                 describe: Callable[[KMirrorError], str] = str):
        self.outage, self.sleep, self.describe = outage, sleep, describe
        self.missing = 0

    def again(self, error: KMirrorError, began: float) -> bool:
        """Whether to make the call, begun at ``began`` and failed on ``error``, again (after
        the wait it needs); False for an error to raise."""
        if verdict(error) == "missing" and self.missing < MISSING_TRIES:
            self.missing += 1
            return True
        return is_outage(error) and self.outage.pause(self.describe(error), began, self.sleep)


def ride_out(call: Callable[[], T], outage: Outage, sleep: Callable[[float], bool], *,
             describe: Callable[[KMirrorError], str] = str) -> T:
    """``call()``, made again through what :class:`Retries` retries; other errors, and an
    outage past the limit, raise. ``sleep(seconds)`` returns False when a stop was requested
    meanwhile: :class:`OutageInterrupted`."""
    retries = Retries(outage, sleep, describe)
    while True:
        began = outage.clock()
        try:
            result = call()
        except KMirrorError as exc:
            if not retries.again(exc, began):
                raise
            continue
        outage.ended()
        return result
