"""A transaction's first AddPartitionsToTxn meets CONCURRENT_TRANSACTIONS while the coordinator
still writes the previous transaction's markers (milliseconds on Kafka 4.x, measured in
docs/performance.md). Java's producer asks again every 20 ms there (``ADD_PARTITIONS_RETRY_BACKOFF_MS``)
instead of backing off exponentially; so must kmirror's, or a copier that commits every 20 ms
waits 100, 200, 400 ms. The coordinator here is a script of answers; the client's own retry
policy would sleep 0.1 s and more, which these sleeps must never be."""

from __future__ import annotations

from types import SimpleNamespace

import kafka.errors as kerr
import pytest

from mirror.kafka import TopicPartition
from mirror.kafka import transactions
from mirror.kafka.errors import BrokerApiError
from mirror.kafka.transactions import MARKERS_PENDING_BACKOFF_S, TransactionManager


class _Client:
    """Runs each attempt once: the client's own retries are not what is tested."""

    def retrying(self, operation, attempt):
        return attempt()


class _Coordinator:
    def __init__(self, codes: list[int]):
        self.codes = codes
        self.calls = 0

    def call(self, request, read):
        code = self.codes[min(self.calls, len(self.codes) - 1)]
        self.calls += 1
        partition = SimpleNamespace(partition_index=0, partition_error_code=code)
        return read(SimpleNamespace(results_by_topic_v3_and_below=[SimpleNamespace(name="t", results_by_partition=[partition])]))


def _manager(codes: list[int], monkeypatch, timeout_ms: int = 60_000) -> tuple[TransactionManager, list[float]]:
    manager = TransactionManager(_Client(), "job-0", timeout_ms=timeout_ms)
    manager._coordinator = _Coordinator(codes)
    slept: list[float] = []
    monkeypatch.setattr(transactions.time, "sleep", slept.append)
    return manager, slept


CONCURRENT = kerr.ConcurrentTransactionsError.errno


def test_concurrent_transactions_is_asked_again_every_20_ms(monkeypatch):
    manager, slept = _manager([CONCURRENT] * 3 + [0], monkeypatch)
    manager.add_partitions([TopicPartition("t", 0)])
    assert slept == [MARKERS_PENDING_BACKOFF_S] * 3 == [0.02] * 3
    assert manager._coordinator.calls == 4


def test_markers_that_never_finish_end_in_a_typed_error(monkeypatch):
    manager, slept = _manager([CONCURRENT], monkeypatch, timeout_ms=0)
    with pytest.raises(BrokerApiError) as refused:
        manager.add_partitions([TopicPartition("t", 0)])
    assert refused.value.code == CONCURRENT and refused.value.retriable


def test_other_errors_are_not_retried_here(monkeypatch):
    manager, slept = _manager([kerr.TransactionalIdAuthorizationFailedError.errno], monkeypatch)
    with pytest.raises(BrokerApiError):
        manager.add_partitions([TopicPartition("t", 0)])
    assert slept == [] and manager._coordinator.calls == 1
