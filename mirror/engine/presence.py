"""A running job says so on its destination, so that a failover refuses while it still copies.

A job that is idle writes nothing (its copiers commit only what they copy), so nothing on the
clusters tells a stopped job from one that waits for records, or for its source to come back.
The driver therefore writes a *presence* record every :data:`EVERY_S` to the flow's topic
(:mod:`.flow`, key ``running``), and, once it ended cleanly (its resident copiers released),
one saying it stopped. :func:`check_not_running` refuses while the last record is of a job
that has not said it stopped and is younger than the record's ``lapse_s``: :data:`STALE_AFTER`
intervals, and the copiers' lease, for the copiers of a driver killed outright go on until
their lease runs out.

Ages are told by the destination's clock alone: the flow topic is stamped by the broker
(LogAppendTime), and the reader's "now" is the stamp of a record it writes
(:meth:`~.flow.FlowLog.now_ms`), so machines whose clocks disagree cannot take a running job
for a stopped one.

The record also says how many transactional ids the job's copies use, so that a failover can
fence them (:func:`~.failover.fail_over`): a copier that outlived its driver then cannot commit.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import uuid
from dataclasses import dataclass

from kcodecs import KMirrorError

from ..kafka import KafkaClient
from .flow import RUNNING_KEY, FlowLog, FlowRecordError

__all__ = ["Presence", "PresenceBeacon", "JobRunningError", "check_not_running", "lapse_s", "EVERY_S", "STALE_AFTER"]

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
    """One run of the job, as it last said it was (the record's broker time is its age)."""

    run_id: str
    host: str
    pid: int
    every_s: float
    lapse_s: float
    """How long after this record the job may still write, if it says nothing more."""
    transactional_ids: int = 0
    """How many of the job's transactional ids its copies use (0: at-least-once, or not known yet)."""
    stopped: bool = False

    def encode(self) -> bytes:
        return json.dumps({"run_id": self.run_id, "host": self.host, "pid": self.pid, "every_s": self.every_s,
                           "lapse_s": self.lapse_s, "transactional_ids": self.transactional_ids,
                           "stopped": self.stopped}, sort_keys=True).encode()

    @classmethod
    def decode(cls, value: bytes) -> "Presence":
        try:
            f = json.loads(value)
            return cls(str(f["run_id"]), str(f["host"]), int(f["pid"]), float(f["every_s"]), float(f["lapse_s"]),
                       int(f.get("transactional_ids", 0)), bool(f.get("stopped", False)))
        except (ValueError, KeyError, TypeError) as exc:
            raise FlowRecordError(f"a presence record kmirror did not write: {value[:200]!r} ({exc})") from None


def lapse_s(every_s: float, lease_s: float) -> float:
    """How long a job that said nothing more may still write: :data:`STALE_AFTER` intervals of
    its presence, and its copiers' lease (0 without resident copiers)."""
    return STALE_AFTER * every_s + lease_s


def check_not_running(flow: FlowLog, what: str) -> Presence | None:
    """Raise :class:`JobRunningError` if the job of ``flow`` runs; else its last presence, if any.
    ``what``: the step refused, for the line."""
    now_ms, records = flow.now_ms()
    record = records.get(RUNNING_KEY)
    if record is None:
        return None
    presence = Presence.decode(bytes(record.value))
    age = max(0.0, (now_ms - record.timestamp) / 1000)
    if not presence.stopped and age < presence.lapse_s:
        raise JobRunningError(
            f"job {flow.job} still runs (on {presence.host}, pid {presence.pid}; it said so {age:.0f} s ago): "
            f"stop it before {what}, or, if it was killed, wait {presence.lapse_s - age:.0f} s more for it and its "
            f"copiers to lapse")
    return presence


class PresenceBeacon(threading.Thread):
    """The driver's presence, written every :data:`EVERY_S` until :meth:`stop`; after a clean
    stop the thread writes that the run stopped. Only this thread writes once it started (a
    client serves one thread), each write with its client's few tries: one that fails is
    logged and made again at the next interval, and the copy does not depend on it."""

    def __init__(self, client: KafkaClient, job: str, *, lease_s: float, every_s: float = EVERY_S):
        super().__init__(name="kmirror-presence", daemon=True)
        self._flow = FlowLog(client, job)
        self._every_s = every_s
        self._lapse_s = lapse_s(every_s, lease_s)
        self._run_id = uuid.uuid4().hex
        self._stopped = threading.Event()
        self._clean = False
        self._failures = 0
        self.transactional_ids = 0
        """Set by the job once it knows (a new value goes out with the next record)."""

    def say(self, *, stopped: bool = False) -> None:
        """One record; before :meth:`start`, or on this thread."""
        presence = Presence(self._run_id, socket.gethostname(), os.getpid(), self._every_s, self._lapse_s,
                            self.transactional_ids, stopped)
        try:
            self._flow.write(RUNNING_KEY, presence.encode())
            self._failures = 0
        except Exception as exc:  # noqa: BLE001 - the copy goes on; the next interval tries again
            self._failures += 1
            (log.warning if self._failures == STALE_AFTER else log.debug)(
                "writing the job's presence to the destination failed %d times in a row (a failover may take the "
                "job for stopped meanwhile): %s", self._failures, exc)

    def run(self) -> None:
        while not self._stopped.wait(self._every_s):
            self.say()
        if self._clean:
            self.say(stopped=True)

    def stop(self, *, clean: bool) -> None:
        """End the thread; ``clean``: the job ended with its copiers released, and says so
        (otherwise its last record lapses by itself)."""
        self._clean = clean
        self._stopped.set()
        self.join(30)
