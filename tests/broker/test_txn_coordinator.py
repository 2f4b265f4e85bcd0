"""The transaction coordinator on its own: Kafka's TransactionCoordinator rules, its state log,
timeouts through the Clock seam, and in-doubt transactions completed after a crash.

Markers go to a recording fake (the MarkerWriter seam), so each test sees exactly which
markers the coordinator decided to write, with which epochs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_helpers import T0, ManualClock, RecordingMarkers, SequentialIds
from mirror.broker.errors import ApiError
from mirror.broker.transactions import TransactionCoordinator, TransactionStateLog, TxnMetadata, TxnState
from mirror.broker.transactions import state_log as state_log_module

INVALID_REQUEST, INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING = 42, 48, 49
INVALID_TRANSACTION_TIMEOUT, CONCURRENT_TRANSACTIONS, PRODUCER_FENCED = 50, 51, 90


@pytest.fixture
def env(tmp_path):
    markers, clock, ids = RecordingMarkers(), ManualClock(), SequentialIds()

    def coordinator() -> TransactionCoordinator:
        made = TransactionCoordinator(TransactionStateLog(tmp_path / ".transactions"), ids, markers, clock)
        made.load()
        return made

    return coordinator, markers, clock


def code_of(call, *args) -> int:
    with pytest.raises(ApiError) as info:
        call(*args)
    return info.value.code


def test_init_gives_epoch_zero_then_bumps_it(env):
    coordinator, _, _ = env
    c = coordinator()
    pid, epoch = c.init_producer_id("a", 60_000)
    assert epoch == 0
    assert c.init_producer_id("a", 60_000) == (pid, 1)
    assert c.init_producer_id("b", 60_000)[0] != pid


def test_init_on_an_ongoing_transaction_aborts_it_under_a_fenced_epoch(env):
    coordinator, markers, _ = env
    c = coordinator()
    pid, epoch = c.init_producer_id("a", 60_000)
    c.add_partitions("a", pid, epoch, [("t", 0), ("t", 1)])
    assert c.init_producer_id("a", 60_000) == (pid, epoch + 2)  # Kafka: fence to +1 and abort, then +1 again
    assert markers.written == [(("t", 0), pid, epoch + 1, False), (("t", 1), pid, epoch + 1, False)]
    assert code_of(c.end_txn, "a", pid, epoch, True) == PRODUCER_FENCED


def test_a_transaction_commits_and_a_retry_of_the_commit_is_fine(env):
    coordinator, markers, _ = env
    c = coordinator()
    pid, epoch = c.init_producer_id("a", 60_000)
    c.add_partitions("a", pid, epoch, [("t", 0)])
    c.add_partitions("a", pid, epoch, [("t", 0), ("u", 3)])
    c.verify("a", pid, epoch, ("u", 3))
    c.end_txn("a", pid, epoch, True)
    assert markers.written == [(("t", 0), pid, epoch, True), (("u", 3), pid, epoch, True)]
    assert c.get("a").state is TxnState.COMPLETE_COMMIT and not c.get("a").partitions
    c.end_txn("a", pid, epoch, True)
    assert code_of(c.end_txn, "a", pid, epoch, False) == INVALID_TXN_STATE
    assert len(markers.written) == 2


@pytest.mark.parametrize("call, args, code", [
    ("add_partitions", ("nobody", 1, 0, [("t", 0)]), INVALID_PRODUCER_ID_MAPPING),
    ("add_partitions", ("a", 999, 0, [("t", 0)]), INVALID_PRODUCER_ID_MAPPING),
    ("add_partitions", ("a", "PID", 7, [("t", 0)]), PRODUCER_FENCED),
    ("add_partitions", ("", "PID", 0, [("t", 0)]), INVALID_REQUEST),
    ("end_txn", ("a", "PID", 0, True), INVALID_TXN_STATE),  # nothing to commit
    ("end_txn", ("nobody", 1, 0, False), INVALID_PRODUCER_ID_MAPPING),
    ("verify", ("a", "PID", 0, ("t", 0)), INVALID_TXN_STATE),  # not added to a transaction
    ("verify", ("a", "PID", 1, ("t", 0)), PRODUCER_FENCED),
    ("verify", (None, "PID", 0, ("t", 0)), INVALID_REQUEST),
    ("init_producer_id", ("", 60_000), INVALID_REQUEST),
    ("init_producer_id", ("a", 0), INVALID_TRANSACTION_TIMEOUT),
    ("init_producer_id", ("a", 15 * 60 * 1000 + 1), INVALID_TRANSACTION_TIMEOUT),
])
def test_kafkas_error_codes(env, call, args, code):
    coordinator, _, _ = env
    c = coordinator()
    pid, _ = c.init_producer_id("a", 60_000)
    args = tuple(pid if arg == "PID" else arg for arg in args)
    assert code_of(getattr(c, call), *args) == code


def test_kip_360_a_producer_may_bump_its_own_epoch_and_retry_the_bump(env):
    coordinator, _, _ = env
    c = coordinator()
    pid, epoch = c.init_producer_id("a", 60_000)
    assert c.init_producer_id("a", 60_000, (pid, epoch)) == (pid, epoch + 1)
    assert c.init_producer_id("a", 60_000, (pid, epoch)) == (pid, epoch + 1)  # its response was lost
    c.init_producer_id("a", 60_000)  # another instance takes over
    assert code_of(c.init_producer_id, "a", 60_000, (pid, epoch + 1)) == PRODUCER_FENCED


def test_exhausted_epochs_rotate_the_producer_id(env, tmp_path):
    coordinator, _, _ = env
    log = TransactionStateLog(tmp_path / ".transactions")
    log.load()
    log.append(TxnMetadata("a", 7, 32765, 60_000, TxnState.COMPLETE_COMMIT, T0))
    log.close()
    c = coordinator()
    assert c.init_producer_id("a", 60_000) == (7, 32766)
    new_pid, epoch = c.init_producer_id("a", 60_000)
    assert new_pid != 7 and epoch == 0
    assert c.get("a").previous_producer_id == 7


def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced(env):
    coordinator, markers, clock = env
    c = coordinator()
    pid, epoch = c.init_producer_id("a", 10_000)
    c.add_partitions("a", pid, epoch, [("t", 0)])
    clock.now += 10_000
    c.tick()
    assert markers.written == []  # not older than its timeout yet
    clock.now += 1
    c.tick()
    assert markers.written == [(("t", 0), pid, epoch + 1, False)]
    assert c.get("a").state is TxnState.COMPLETE_ABORT
    assert code_of(c.end_txn, "a", pid, epoch, True) == PRODUCER_FENCED
    assert code_of(c.add_partitions, "a", pid, epoch, [("t", 0)]) == PRODUCER_FENCED
    assert c.init_producer_id("a", 10_000) == (pid, epoch + 2)


def test_state_survives_a_restart_and_an_ongoing_transaction_stays_open(env):
    coordinator, markers, _ = env
    c = coordinator()
    pid, epoch = c.init_producer_id("a", 60_000)
    c.add_partitions("a", pid, epoch, [("t", 0)])
    c.close()
    again = coordinator()
    assert again.get("a").state is TxnState.ONGOING and again.get("a").partitions == {("t", 0)}
    again.verify("a", pid, epoch, ("t", 0))
    again.end_txn("a", pid, epoch, False)
    assert markers.written == [(("t", 0), pid, epoch, False)]


def test_a_decided_transaction_whose_markers_were_lost_is_completed_on_load(env):
    coordinator, markers, _ = env
    c = coordinator()
    pid, epoch = c.init_producer_id("a", 60_000)
    c.add_partitions("a", pid, epoch, [("t", 0), ("t", 1)])
    markers.fail = True  # the broker dies between PrepareCommit and the markers
    c.end_txn("a", pid, epoch, True)  # the decision is durable, so the client is told it committed
    assert c.get("a").state is TxnState.PREPARE_COMMIT
    assert code_of(c.add_partitions, "a", pid, epoch, [("t", 0)]) == CONCURRENT_TRANSACTIONS
    markers.fail = False
    again = coordinator()
    assert markers.written == [(("t", 0), pid, epoch, True), (("t", 1), pid, epoch, True)]
    assert again.get("a").state is TxnState.COMPLETE_COMMIT


def test_the_tick_retries_markers_that_failed(env):
    coordinator, markers, _ = env
    c = coordinator()
    pid, epoch = c.init_producer_id("a", 60_000)
    c.add_partitions("a", pid, epoch, [("t", 0)])
    markers.fail = True
    c.end_txn("a", pid, epoch, False)
    assert code_of(c.end_txn, "a", pid, epoch, False) == CONCURRENT_TRANSACTIONS
    markers.fail = False
    c.tick()
    assert c.get("a").state is TxnState.COMPLETE_ABORT
    c.end_txn("a", pid, epoch, False)


def test_a_torn_last_record_is_cut_off(env, tmp_path):
    coordinator, _, _ = env
    c = coordinator()
    pid, epoch = c.init_producer_id("a", 60_000)
    c.add_partitions("a", pid, epoch, [("t", 0)])
    c.close()
    path = tmp_path / ".transactions" / "state.log"
    whole = path.read_bytes()
    path.write_bytes(whole[:-3])  # the AddPartitions record, torn: never acknowledged
    again = coordinator()
    assert again.get("a").state is TxnState.EMPTY
    assert path.stat().st_size < len(whole) - 3


def test_the_state_log_is_compacted(env, tmp_path, monkeypatch):
    monkeypatch.setattr(state_log_module, "COMPACT_SLACK", 10)
    coordinator, _, _ = env
    c = coordinator()
    for _ in range(30):
        pid, epoch = c.init_producer_id("a", 60_000)
        c.add_partitions("a", pid, epoch, [("t", 0)])
        c.end_txn("a", pid, epoch, True)
    c.init_producer_id("b", 60_000)
    c.close()
    records = _count_records(tmp_path / ".transactions" / "state.log")
    assert records <= 2 + 10
    again = coordinator()
    assert again.get("a").producer_epoch == 29 and again.get("a").state is TxnState.COMPLETE_COMMIT
    assert again.get("b").producer_epoch == 0


def _count_records(path: Path) -> int:
    data, position, count = path.read_bytes(), 0, 0
    while position < len(data):
        position += 8 + int.from_bytes(data[position:position + 4], "big")
        count += 1
    return count
