"""A running job says so on its destination, so that a failover refuses while it still copies.

A job that is idle writes nothing (its copiers commit only what they copy), so nothing on the
clusters tells a stopped job from one that waits for records, or for its source to come back.
The driver therefore writes a *presence* record every :data:`EVERY_S` to the flow's topic
(:mod:`.flow`, key ``running``), and one saying it stopped when it ends cleanly.
:func:`check_not_running` refuses when the last record is of a job that has not said it
stopped and was written less than :data:`STALE_AFTER` intervals ago: a job killed outright
stops counting as running that long after its last word.

The age is told by the local clock against the writer's: machines kept in time by NTP agree
within far less than an interval.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass

from kcodecs import KMirrorError

from ..kafka import KafkaClient
from .flow import RUNNING_KEY, FlowLog, FlowRecordError

__all__ = ["Presence", "PresenceBeacon", "JobRunningError", "check_not_running", "EVERY_S", "STALE_AFTER"]

log = logging.getLogger(__name__)

EVERY_S = 10.0
"""How often a running job writes its presence."""
STALE_AFTER = 3
"""Intervals without a presence record after which a job that did not say it stopped is taken
for stopped (killed, or its machine gone)."""


class JobRunningError(KMirrorError):
    """The job still runs (or stopped less than :data:`STALE_AFTER` intervals ago without saying so)."""


@dataclass(frozen=True)
class Presence:
    """One run of the job, as it last said it was."""

    run_id: str
    host: str
    pid: int
    at_ms: int
    every_s: float
    stopped: bool = False

    def running(self, now_ms: int) -> bool:
        return not self.stopped and now_ms - self.at_ms < STALE_AFTER * self.every_s * 1000

    def encode(self) -> bytes:
        return json.dumps({"run_id": self.run_id, "host": self.host, "pid": self.pid, "at_ms": self.at_ms,
                           "every_s": self.every_s, "stopped": self.stopped}, sort_keys=True).encode()

    @classmethod
    def decode(cls, value: bytes) -> "Presence":
        try:
            f = json.loads(value)
            return cls(str(f["run_id"]), str(f["host"]), int(f["pid"]), int(f["at_ms"]), float(f["every_s"]),
                       bool(f.get("stopped", False)))
        except (ValueError, KeyError, TypeError) as exc:
            raise FlowRecordError(f"a presence record kmirror did not write: {value[:200]!r} ({exc})") from None


def check_not_running(flow: FlowLog, what: str, *, now_ms: int | None = None) -> Presence | None:
    """Raise :class:`JobRunningError` if the job of ``flow`` runs; else its last presence, if any.
    ``what``: the step refused, for the line."""
    value = flow.read().get(RUNNING_KEY)
    if value is None:
        return None
    presence = Presence.decode(value)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    if presence.running(now_ms):
        age = max(0.0, (now_ms - presence.at_ms) / 1000)
        left = STALE_AFTER * presence.every_s - age
        raise JobRunningError(
            f"job {flow.job} still runs (on {presence.host}, pid {presence.pid}; it said so {age:.0f} s ago): "
            f"stop it before {what}, or, if it was killed, wait {left:.0f} s more for its presence to lapse")
    return presence


class PresenceBeacon(threading.Thread):
    """The driver's presence, written every :data:`EVERY_S` until :meth:`stop`, which writes
    that the run stopped. A write that fails is logged and tried again at the next interval:
    the copy does not depend on it."""

    def __init__(self, client: KafkaClient, job: str, *, every_s: float = EVERY_S):
        super().__init__(name="kmirror-presence", daemon=True)
        self._flow = FlowLog(client, job)
        self._every_s = every_s
        self._run_id = uuid.uuid4().hex
        self._stopped = threading.Event()

    def _presence(self, *, stopped: bool = False) -> Presence:
        return Presence(self._run_id, socket.gethostname(), os.getpid(), int(time.time() * 1000), self._every_s,
                        stopped)

    def say(self, *, stopped: bool = False) -> None:
        try:
            self._flow.write(RUNNING_KEY, self._presence(stopped=stopped).encode())
        except KMirrorError as exc:
            log.debug("writing the job's presence failed (tried again in %g s): %s", self._every_s, exc)

    def run(self) -> None:
        while not self._stopped.wait(self._every_s):
            self.say()

    def stop(self) -> None:
        self._stopped.set()
        self.join(30)
        self.say(stopped=True)
