"""Idle transactional ids expire (Kafka's ``transactional.id.expiration.ms``,
``TransactionStateManager.removeExpiredTransactionalIds``): the coordinator alone under a
ManualClock, then a librdkafka transactional producer against a serving broker whose clock
jumps forward, across a restart.

An id expires when it has no transaction (Empty, CompleteCommit, CompleteAbort) and its state
has not changed for the expiration; its tombstone is persisted before it is forgotten, so it
stays forgotten after the state log is replayed. Its next InitProducerId gets a new producer
id at epoch 0, as from Kafka.
"""

from __future__ import annotations

import logging

import pytest

from broker_helpers import (T0, TIMEOUT_S, ManualClock, RecordingMarkers, SequentialIds, ShiftedClock, create_topic,
                            read_kafka_python, transactional_producer, wait_for)
from mirror.broker import EmbeddedBroker
from mirror.broker.errors import ApiError
from mirror.broker.transactions import TransactionCoordinator, TransactionStateLog, TxnMetadata, TxnState
from mirror.broker.transactions import state_log as state_log_module

EXPIRY_MS = 60_000
INVALID_PRODUCER_ID_MAPPING = 49


@pytest.fixture
def env(tmp_path):
    """``coordinator()`` opens the state log in ``tmp_path`` afresh each call: a restart."""
    clock, ids = ManualClock(), SequentialIds()

    def coordinator() -> TransactionCoordinator:
        made = TransactionCoordinator(TransactionStateLog(tmp_path / ".transactions"), ids, RecordingMarkers(), clock,
                                      id_expiration_ms=EXPIRY_MS)
        made.load()
        return made

    return coordinator, clock


def test_an_idle_id_expires_after_the_expiration_and_starts_afresh(env, caplog):
    coordinator, clock = env
    c = coordinator()
    pid, epoch = c.init_producer_id("a", 60_000)
    c.add_partitions("a", pid, epoch, [("t", 0)])
    c.end_txn("a", pid, epoch, True)  # CompleteCommit, stamped now
    clock.now += EXPIRY_MS - 1
    c.remove_expired()
    assert c.get("a").state is TxnState.COMPLETE_COMMIT
    clock.now += 1  # Kafka's shouldExpire: last update <= now - expiration
    with caplog.at_level(logging.INFO, logger="mirror.broker.transactions"):
        c.remove_expired()
        c.remove_expired()  # nothing left to remove: no second line
    assert c.get("a") is None
    lines = [r.getMessage() for r in caplog.records if "transactional.id.expiration.ms" in r.getMessage()]
    assert lines == ["removed 1 transactional ids idle for 60000 ms or more (transactional.id.expiration.ms), 0 left"]
    with pytest.raises(ApiError) as refused:  # the producer that owned it, back from its pause
        c.add_partitions("a", pid, epoch, [("t", 0)])
    assert refused.value.code == INVALID_PRODUCER_ID_MAPPING
    new_pid, new_epoch = c.init_producer_id("a", 60_000)
    assert new_pid > pid and new_epoch == 0


@pytest.mark.parametrize("state", [TxnState.EMPTY, TxnState.COMPLETE_ABORT])
def test_every_state_without_a_transaction_expires(env, tmp_path, state):
    coordinator, clock = env
    log = TransactionStateLog(tmp_path / ".transactions")
    log.load()
    log.append(TxnMetadata("a", 7, 3, 60_000, state, T0))
    log.close()
    c = coordinator()
    clock.now += EXPIRY_MS
    c.remove_expired()
    assert c.get("a") is None


def test_a_transaction_keeps_its_id_however_old(env):
    """Ongoing, and in doubt (its markers not all written): never expired, as in Kafka."""
    coordinator, clock = env
    c = coordinator()
    pid, epoch = c.init_producer_id("open", 10 * EXPIRY_MS)
    c.add_partitions("open", pid, epoch, [("t", 0)])
    c.init_producer_id("idle", 60_000)
    clock.now += 2 * EXPIRY_MS  # within the open transaction's timeout: tick() would not abort it
    c.remove_expired()
    assert c.get("open").state is TxnState.ONGOING and c.get("idle") is None
    c.verify("open", pid, epoch, ("t", 0))
    c.end_txn("open", pid, epoch, True)


def test_an_in_doubt_transaction_keeps_its_id(env, tmp_path):
    coordinator, clock = env
    log = TransactionStateLog(tmp_path / ".transactions")
    log.load()
    log.append(TxnMetadata("doubt", 7, 3, 60_000, TxnState.PREPARE_COMMIT, T0, partitions=frozenset({("t", 0)}),
                           txn_start_ms=T0))
    log.close()

    failing = RecordingMarkers()
    failing.fail = True
    c = TransactionCoordinator(TransactionStateLog(tmp_path / ".transactions"), SequentialIds(), failing, clock,
                               id_expiration_ms=EXPIRY_MS)
    c.load()  # its markers fail again: still PrepareCommit
    clock.now += 2 * EXPIRY_MS
    c.remove_expired()
    assert c.get("doubt").state is TxnState.PREPARE_COMMIT


def test_an_expired_id_stays_expired_after_a_restart(env, tmp_path):
    coordinator, clock = env
    c = coordinator()
    old_pid, _ = c.init_producer_id("gone", 60_000)
    clock.now += EXPIRY_MS
    kept_pid, kept_epoch = c.init_producer_id("kept", 60_000)  # stamped later: not expired yet
    c.remove_expired()
    c.close()
    again = coordinator()  # replays the tombstone after the id's records
    assert again.get("gone") is None
    assert (again.get("kept").producer_id, again.get("kept").producer_epoch) == (kept_pid, kept_epoch)
    new_pid, epoch = again.init_producer_id("gone", 60_000)
    assert new_pid not in (old_pid, kept_pid) and epoch == 0


def test_compaction_drops_the_tombstones_with_what_they_removed(env, tmp_path, monkeypatch):
    monkeypatch.setattr(state_log_module, "COMPACT_SLACK", 5)
    coordinator, clock = env
    c = coordinator()
    for i in range(10):
        c.init_producer_id(f"id-{i}", 60_000)
    clock.now += EXPIRY_MS
    c.init_producer_id("kept", 60_000)
    c.remove_expired()  # ten tombstones: the file now holds 21 records for one id, and is rewritten
    c.close()
    records = (tmp_path / ".transactions" / "state.log").read_bytes()
    assert b"id-" not in records and b"kept" in records
    again = coordinator()
    assert again.get("kept").producer_epoch == 0 and again.get("id-3") is None


def test_a_tombstone_that_cannot_be_written_keeps_every_id_for_the_next_run(tmp_path, caplog):
    class FullDisk(TransactionStateLog):
        full = True

        def remove(self, transactional_ids):
            if self.full:
                raise OSError(28, "No space left on device")
            super().remove(transactional_ids)

    clock, log = ManualClock(), FullDisk(tmp_path / ".transactions")
    c = TransactionCoordinator(log, SequentialIds(), RecordingMarkers(), clock, id_expiration_ms=EXPIRY_MS)
    c.load()
    c.init_producer_id("a", 60_000)
    c.init_producer_id("b", 60_000)
    clock.now += EXPIRY_MS
    c.remove_expired()
    assert c.get("a") is not None and c.get("b") is not None
    assert "cannot persist the expiry of 2 transactional ids, will retry: [Errno 28] No space left" in caplog.text
    log.full = False
    c.remove_expired()
    assert c.get("a") is None and c.get("b") is None


@pytest.mark.interop
def test_librdkafka_gets_a_new_producer_id_for_an_expired_id_after_a_restart(tmp_path):
    """The broker's own task expires the id while its producer is idle; the expiry outlives a
    restart; a new librdkafka producer with that transactional.id then gets a new producer id
    at epoch 0 and commits, and readers see both transactions."""
    data, clock = tmp_path / "data", ShiftedClock()
    options = dict(clock=clock, transactional_id_expiration_ms=EXPIRY_MS, transaction_remove_expired_interval_ms=20)
    with EmbeddedBroker(data, **options) as broker:
        create_topic(broker.bootstrap, "expiring")
        first = transactional_producer(broker.bootstrap, "sleeper")
        first.begin_transaction()
        first.produce("expiring", value=b"before")
        first.commit_transaction(TIMEOUT_S)
        old = broker.state.transactions.get("sleeper")
        assert old.state is TxnState.COMPLETE_COMMIT
        clock.offset_ms += EXPIRY_MS + 1
        wait_for(lambda: broker.state.transactions.get("sleeper") is None, "the idle transactional id to expire")
        del first
    with EmbeddedBroker(data, **options) as broker:
        assert broker.state.transactions.get("sleeper") is None
        second = transactional_producer(broker.bootstrap, "sleeper")
        new = broker.state.transactions.get("sleeper")
        assert new.producer_id > old.producer_id and new.producer_epoch == 0
        second.begin_transaction()
        second.produce("expiring", value=b"after")
        second.commit_transaction(TIMEOUT_S)
        assert read_kafka_python(broker.bootstrap, "expiring", "read_committed", 1)[0] == [b"after", b"before"]
