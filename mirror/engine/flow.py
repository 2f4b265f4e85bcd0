"""Which cluster is primary for a job's flow, kept on the clusters: ``kmirror-flow.<job>`` (issue 71).

A flow A -> B is one job's: its source A is primary, B holds the copy. After a disaster the
operator promotes B (``kmirror failover``), later copies B's own records home (``kmirror
failback``) and makes A primary again (``failback --finish``). Each step is written here, on
the job's destination B, so that whichever machine runs the next step knows what the last one
did, and a step out of order is refused (:func:`check_step`), not just noted in a checkpoint
directory that may be gone with the machine that held it.

One compacted topic of one partition; its keys:

- ``state``: the last step taken (:class:`FlowState`), with its *promotion points*: per
  partition of B, B's end when B was promoted; the records after them are B's own;
- ``running``: the running job's presence (:mod:`.presence`), so that failover refuses while
  the job still copies into B;
- ``probe``: written by a reader that needs B's time now (:meth:`FlowLog.now_ms`).

Records are stamped by the broker (``message.timestamp.type=LogAppendTime``), so their ages are
told by B's clock alone, never by two machines' clocks against each other.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Literal, Mapping

import kcodecs
from kcodecs import KMirrorError, Record

from ..kafka import KafkaClient, NewTopic, TopicPartition
from .topic_tail import CommittedTail

__all__ = ["FLOW_TOPIC_PREFIX", "flow_topic", "flow_topic_spec", "FlowState", "FlowLog", "FlowStepError",
           "FlowRecordError", "check_step", "primary_line", "Step"]

FLOW_TOPIC_PREFIX = "kmirror-flow."
STATE_KEY = b"state"
RUNNING_KEY = b"running"
PROBE_KEY = b"probe"

Step = Literal["failed-over", "failed-back"]
"""``failed-over``: B is primary; ``failed-back``: A is primary again (as before any failover)."""


class FlowStepError(KMirrorError):
    """A step of the disaster-recovery runbook asked for out of order: the line names the step
    that comes first (docs/operations.md, "Disaster recovery")."""


class FlowRecordError(KMirrorError):
    """A record on ``kmirror-flow.<job>`` that kmirror did not write."""


def flow_topic(job: str) -> str:
    return FLOW_TOPIC_PREFIX + job


def flow_topic_spec(job: str) -> NewTopic:
    """One partition, compacted: the last record of each key is the flow's state; stamped by the broker."""
    return NewTopic(flow_topic(job), 1, configs={"cleanup.policy": "compact", "message.timestamp.type": "LogAppendTime"})


@dataclass(frozen=True)
class FlowState:
    """The last step of the runbook taken for the job's flow."""

    step: Step
    at_ms: int
    """When it was taken (ms since the epoch, the machine's clock that took it)."""
    promotion: Mapping[TopicPartition, int] = field(default_factory=dict)
    """Per partition of the destination (B): its end when B was promoted (the last stable
    offset: a transaction the stopped job left open is not B's). Records from there on are B's
    own, the ones a failback copies home."""
    copied: Mapping[TopicPartition, int] = field(default_factory=dict)
    """Per source partition (A): the offset after the last one the job had copied into B when
    B was promoted. What A holds past it never reached B (the recovery point)."""
    source_cluster: str | None = None
    """A's cluster id, if A answered at the step (None: it did not)."""
    destination_cluster: str | None = None
    topic_ids: Mapping[str, str] = field(default_factory=dict)
    """The ids (KIP-516) of the topics the promotion points are of, where the cluster gives
    them: a topic deleted and made again since is another topic, whose offsets start again,
    and the points say nothing of it."""

    def points_of(self, ids: Mapping[str, str]) -> dict[TopicPartition, int]:
        """The promotion points of the topics that are still the ones they were taken of
        (``ids``: the cluster's ids now; a topic without an id on either side counts as the same)."""
        return {tp: offset for tp, offset in self.promotion.items()
                if self.topic_ids.get(tp.topic, ids.get(tp.topic)) == ids.get(tp.topic, self.topic_ids.get(tp.topic))}

    def line(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.at_ms / 1000))
        if self.step == "failed-over":
            return f"failed over to the destination at {when}: the destination is primary for the job's topics"
        return f"failed back at {when}: the source is primary for the job's topics again"


def primary_line(state: FlowState | None) -> str:
    """Which cluster is primary for the flow, and since which step (``kmirror status``)."""
    if state is None:
        return "primary: the source (the job copies it to the destination; no failover recorded)"
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(state.at_ms / 1000))
    if state.step == "failed-over":
        return (f"primary: the destination, since the failover at {when} (kmirror failback copies its records home "
                f"to the source; kmirror run of the job is refused until 'kmirror failback --finish')")
    return f"primary: the source, again since the failback at {when} (the job copies it to the destination)"


def _offsets_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for tp, offset in sorted(offsets.items()):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offset
    return out


def _offsets_of(value: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, int(p)): int(offset) for topic, partitions in value.items()
            for p, offset in partitions.items()}


def encode_state(state: FlowState) -> bytes:
    return json.dumps({"step": state.step, "at_ms": state.at_ms, "promotion": _offsets_json(state.promotion),
                       "copied": _offsets_json(state.copied), "source_cluster": state.source_cluster,
                       "destination_cluster": state.destination_cluster, "topic_ids": dict(state.topic_ids)},
                      sort_keys=True).encode()


def decode_state(value: bytes) -> FlowState:
    try:
        fields = json.loads(value)
        if fields["step"] not in ("failed-over", "failed-back"):
            raise ValueError(f"unknown step {fields['step']!r}")
        return FlowState(fields["step"], int(fields["at_ms"]), _offsets_of(fields.get("promotion", {})),
                         _offsets_of(fields.get("copied", {})), fields.get("source_cluster"),
                         fields.get("destination_cluster"), {str(t): str(i) for t, i in fields.get("topic_ids", {}).items()})
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise FlowRecordError(f"a flow state record kmirror did not write: {value[:200]!r} ({exc})") from None


class FlowLog:
    """``kmirror-flow.<job>`` on the job's destination: its records by key, read to the end."""

    def __init__(self, client: KafkaClient, job: str, *, max_wait_s: float = 30.0):
        self._client = client
        self.job = job
        self._tp = TopicPartition(flow_topic(job), 0)
        self._max_wait_s = max_wait_s
        self._made = False

    def read(self) -> dict[bytes, Record]:
        """Each key's latest record (none while the topic does not exist)."""
        if not self._made and flow_topic(self.job) not in self._client.topics():
            return {}
        latest: dict[bytes, Record] = {}
        CommittedTail(self._client, self._tp, max_wait_s=self._max_wait_s).update_latest(
            latest, lambda record: (bytes(record.key or b""), None if record.value is None else record))
        return latest

    def state(self) -> FlowState | None:
        """The last step taken; None if no step ever was (A is primary, as it always was)."""
        record = self.read().get(STATE_KEY)
        return None if record is None else decode_state(bytes(record.value))

    def write(self, key: bytes, value: bytes) -> None:
        """One record, acknowledged by every in-sync replica before this returns."""
        if not self._made:
            self._client.create_topics([flow_topic_spec(self.job)])
            self._made = True
        self._client.produce([(self._tp, kcodecs.build_batch([Record(key=key, value=value, timestamp=0)]))])

    def now_ms(self) -> tuple[int, dict[bytes, Record]]:
        """B's time now, as B stamps a record written now, and every key's latest record."""
        self.write(PROBE_KEY, b"")
        records = self.read()
        return records[PROBE_KEY].timestamp, records

    def record(self, state: FlowState) -> None:
        self.write(STATE_KEY, encode_state(state))


def check_step(state: FlowState | None, step: str, job: str) -> None:
    """Refuse ``step`` (``run``, ``failover``, ``failback``, or ``reconcile``: the job's copy of
    its source's unreplicated tail during a failback) where the flow's last step says another
    comes first, with the line naming it (:class:`FlowStepError`)."""
    if step in ("failback", "reconcile"):
        if state is None or state.step != "failed-over":
            raise FlowStepError(f"job {job} " + ("never failed over" if state is None else state.line()) +
                                f": a failback copies home what was written at the destination since a failover; "
                                f"run 'kmirror failover' with this job's options first")
        return
    if state is None or state.step == "failed-back":
        return
    if step == "run":
        raise FlowStepError(f"job {job} was {state.line()}; the job from the source to it would copy over the "
                            f"destination's own records: run 'kmirror failback' with this job's options, and "
                            f"'kmirror failback --finish', before 'kmirror run' again")
    if step == "failover":
        raise FlowStepError(f"job {job} already {state.line()}; the next step is 'kmirror failback' once the source "
                            f"is back")
    raise ValueError(step)
