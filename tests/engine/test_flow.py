"""The flow's state and the job's presence, as kept on the destination (issue 71): what each step
records, which steps each refuses, and when a job counts as running. The records' round trip
through a real broker is in tests/realkafka/test_real_failover.py."""

from __future__ import annotations

import pytest
from kcodecs import Record

from mirror.engine.flow import (RUNNING_KEY, STATE_KEY, FlowRecordError, FlowState, FlowStepError, check_step, decode_state,
                                encode_state)
from mirror.engine.presence import JobRunningError, Presence, check_not_running, lapse_s
from mirror.kafka import TopicPartition

A0, A1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def test_a_failover_state_keeps_every_partitions_points_through_its_encoding():
    state = FlowState("failed-over", 1_764_000_000_000, {A0: 2_000, A1: 0}, {A0: 1_990, A1: 7}, "src-id", "dst-id",
                      {"orders": "Lh3PxV0tQjWJ3o2fJ1tYxA"})
    assert decode_state(encode_state(state)) == state


@pytest.mark.parametrize("value", [b"", b"{}", b'{"step": "paused", "at_ms": 1}', b'{"step": "failed-over"}',
                                   b'{"step": "failed-over", "at_ms": 1, "promotion": {"t": {"x": 1}}}', b"[1]"])
def test_a_state_record_kmirror_did_not_write_is_a_named_error(value):
    with pytest.raises(FlowRecordError, match="a flow state record kmirror did not write"):
        decode_state(value)


def test_run_is_refused_after_a_failover_and_allowed_before_any_and_after_a_failback():
    failed_over = FlowState("failed-over", 0)
    with pytest.raises(FlowStepError, match="job j was failed over to the destination at 1970-01-01 00:00:00 UTC.*"
                                            "'kmirror failback'"):
        check_step(failed_over, "run", "j")
    check_step(None, "run", "j")
    check_step(FlowState("failed-back", 0), "run", "j")


def test_a_second_failover_is_refused_and_names_the_next_step():
    with pytest.raises(FlowStepError, match="job j already failed over .* the next step is 'kmirror failback'"):
        check_step(FlowState("failed-over", 0), "failover", "j")
    check_step(None, "failover", "j")
    check_step(FlowState("failed-back", 0), "failover", "j")


class _Flow:
    """A FlowLog's reading, as the destination would hold it: records stamped by the broker."""

    job = "j"

    def __init__(self, now_ms: int, records: dict[bytes, Record]):
        self.now, self.records = now_ms, records

    def now_ms(self) -> tuple[int, dict[bytes, Record]]:
        return self.now, self.records


def _said(presence: Presence, at_ms: int) -> dict[bytes, Record]:
    return {RUNNING_KEY: Record(key=RUNNING_KEY, value=presence.encode(), timestamp=at_ms),
            STATE_KEY: Record(key=STATE_KEY, value=b"ignored here", timestamp=0)}


def test_a_job_that_spoke_within_its_lapse_and_did_not_say_it_stopped_runs():
    """Its lapse is three intervals of its presence and its copiers' lease: a driver killed
    outright leaves copiers that copy on until their lease runs out."""
    said = Presence("run-1", "host-a", 4242, every_s=10.0, lapse_s=lapse_s(10.0, 30.0), transactional_ids=4)
    assert said.lapse_s == 60.0
    with pytest.raises(JobRunningError, match=r"job j still runs \(on host-a, pid 4242; it said so 59 s ago\): "
                                              r"stop it before a failover, or, if it was killed, wait 1 s more"):
        check_not_running(_Flow(159_000, _said(said, 100_000)), "a failover")
    assert check_not_running(_Flow(160_000, _said(said, 100_000)), "a failover") == said


def test_a_job_that_said_it_stopped_or_never_ran_does_not_run():
    stopped = Presence("run-1", "host-a", 4242, every_s=10.0, lapse_s=30.0, stopped=True)
    assert check_not_running(_Flow(100_001, _said(stopped, 100_000)), "a failover") == stopped
    assert check_not_running(_Flow(0, {}), "a failover") is None


def test_a_presence_record_kmirror_did_not_write_is_a_named_error():
    records = {RUNNING_KEY: Record(key=RUNNING_KEY, value=b'{"run_id": 1}', timestamp=0)}
    with pytest.raises(FlowRecordError, match="a presence record kmirror did not write"):
        check_not_running(_Flow(0, records), "a failover")


def test_a_presence_keeps_what_a_failover_needs_through_its_encoding():
    said = Presence("run-1", "host-a", 4242, every_s=10.0, lapse_s=60.0, transactional_ids=7, stopped=True)
    assert Presence.decode(said.encode()) == said
