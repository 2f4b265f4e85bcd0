"""The transaction coordinator (KIP-98): Kafka's ``TransactionCoordinator`` for one node.

Every request is checked, moved to its next :class:`TxnMetadata`, persisted in the
:class:`TransactionStateLog` and only then applied and answered. Errors are Kafka's
(:class:`ApiError` with the code Kafka's coordinator gives); the handlers turn
PRODUCER_FENCED into INVALID_PRODUCER_EPOCH for request versions that predate it.

EndTxn answers once PrepareCommit/PrepareAbort is persisted and writes the markers right
after the answer went out (the broker's next turn of its event loop), as Kafka's coordinator
sends them afterwards: a client that commits and at once begins its next transaction meets
what it meets on Kafka, a transaction whose markers may still be on their way
(CONCURRENT_TRANSACTIONS), and embedded figures do not hide the markers' cost. Outside an
event loop (the coordinator's unit tests) they are written before the answer. Where Kafka is
asynchronous this coordinator is not otherwise: InitProducerId on an id with an ongoing
transaction fences and aborts it and then bumps the epoch again in the same request (Kafka
answers CONCURRENT_TRANSACTIONS and does that bump when the client retries). The outcome,
epochs included, is the same. Should a marker write fail (a disk error), the decision is
already durable: the transaction stays PrepareCommit/PrepareAbort, requests for it get
CONCURRENT_TRANSACTIONS, and :meth:`tick` writes the markers again, as Kafka's marker
channel retries.

What clients do not see, but Kafka does too:

- on load, a transaction persisted as PrepareCommit/PrepareAbort is completed by writing
  its markers again (``TransactionStateManager.loadTransactionsForTxnTopicPartition``); an
  Ongoing one waits for its timeout or the next InitProducerId;
- :meth:`tick`, run every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``,
  aborts Ongoing transactions older than their timeout under a bumped epoch, which fences
  the producer that abandoned them (``abortTimedOutTransactions``);
- :meth:`remove_expired`, run every ``transaction.remove.expired.transaction.cleanup.interval.ms``,
  forgets the ids idle for ``transactional.id.expiration.ms``
  (``TransactionStateManager.removeExpiredTransactionalIds``): their tombstones are persisted
  first, so they stay forgotten after a restart. The next InitProducerId of such an id starts
  afresh, as in Kafka: a new producer id at epoch 0. Its old producer, if it comes back, gets
  INVALID_PRODUCER_ID_MAPPING.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Iterable

from ..errors import ApiError, kerr
from ..log import LogError
from .markers import MarkerWriter
from .metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TxnMetadata, TxnState, is_epoch_exhausted
from .state_log import TransactionStateLog

__all__ = ["TransactionCoordinator", "COORDINATOR_EPOCH", "DEFAULT_MAX_TIMEOUT_MS", "DEFAULT_ID_EXPIRATION_MS"]

log = logging.getLogger(__name__)

COORDINATOR_EPOCH = 0
"""Kafka's coordinator epoch is the leader epoch of the ``__transaction_state`` partition; a
single node is always its leader, in epoch 0 (as :data:`mirror.broker.validator.LEADER_EPOCH`)."""
DEFAULT_MAX_TIMEOUT_MS = 15 * 60 * 1000
"""Kafka's ``transaction.max.timeout.ms``."""
DEFAULT_ID_EXPIRATION_MS = 7 * 24 * 60 * 60 * 1000
"""Kafka's ``transactional.id.expiration.ms``: seven days."""

TopicPartition = tuple[str, int]


class TransactionCoordinator:
    def __init__(self, state_log: TransactionStateLog, allocate_producer_id: Callable[[], int], markers: MarkerWriter,
                 clock: Callable[[], int], *, max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS,
                 id_expiration_ms: int = DEFAULT_ID_EXPIRATION_MS):
        self._log = state_log
        self._allocate = allocate_producer_id
        self._markers = markers
        self._clock = clock
        self.max_timeout_ms = max_timeout_ms
        self.id_expiration_ms = id_expiration_ms
        self._txns: dict[str, TxnMetadata] = {}

    def load(self) -> None:
        """Replay the state log and complete every in-doubt transaction."""
        self._txns = self._log.load()
        in_doubt = [meta for meta in self._txns.values() if meta.state.in_doubt]
        log.info("transaction coordinator loaded %d transactional ids, completing %d in-doubt transactions",
                 len(self._txns), len(in_doubt))
        for meta in in_doubt:
            self._complete(meta)

    def close(self) -> None:
        self._log.close()

    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self._txns.get(transactional_id)

    # -- client requests -------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int,
                         expected: tuple[int, int] | None = None) -> tuple[int, int]:
        """``(producer_id, epoch)`` for a (re)starting transactional producer (``handleInitProducerId``).

        ``expected`` (InitProducerId v3+, KIP-360) is the id and epoch the producer had: a
        retry of a bump it did not hear back from gets the same answer, a producer that was
        fenced meanwhile gets PRODUCER_FENCED.
        """
        _check_id(transactional_id)
        if not 0 < timeout_ms <= self.max_timeout_ms:
            raise ApiError(kerr.InvalidTransactionTimeoutError,
                           f"transaction timeout {timeout_ms} ms is not in 1..{self.max_timeout_ms} (transaction.max.timeout.ms)")
        now = self._clock()
        meta = self._txns.get(transactional_id) or TxnMetadata.new(transactional_id, self._allocate(), timeout_ms, now)
        if expected is not None and not _may_continue(meta, *expected):
            raise ApiError(kerr.ProducerFencedError,
                           f"{transactional_id!r} is producer {meta.producer_id} epoch {meta.producer_epoch} now,"
                           f" not {expected[0]} epoch {expected[1]}")
        if meta.state.in_doubt:
            meta = self._complete(meta)
            if meta.state.in_doubt:
                raise _concurrent(meta)
        if meta.state is TxnState.ONGOING:
            log.info("%r: InitProducerId aborts its ongoing transaction and fences epoch %d",
                     transactional_id, meta.producer_epoch)
            meta = self._complete(self._persist(meta.fence(now)))
            if meta.state.in_doubt:
                raise _concurrent(meta)
        meta = self._persist(self._next_epoch(meta, timeout_ms, expected, now))
        log.info("%r: producer %d epoch %d", transactional_id, meta.producer_id, meta.producer_epoch)
        return meta.producer_id, meta.producer_epoch

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition]) -> None:
        """Make the partitions part of the producer's transaction, starting it if needed."""
        meta = self._current(transactional_id, producer_id, producer_epoch)
        wanted = frozenset(partitions)
        if meta.state.in_doubt:
            raise _concurrent(meta)
        if meta.state is TxnState.ONGOING and wanted <= meta.partitions:
            return  # Kafka's shortcut: nothing new to persist
        self._persist(meta.add_partitions(wanted, self._clock()))

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, *,
                bump: bool = False) -> tuple[int, int]:
        """Commit or abort: persist the decision and answer; the markers and the completion
        follow (``handleEndTransaction``). Returns the producer id and epoch of the id's next
        transaction.

        ``bump`` is transactions v2 (EndTxn v5, KIP-890 part 2): the end bumps the epoch (and
        past the last epoch, the producer id), and a retry whose first answer was lost, made
        with the epoch the transaction had, is recognised by ``last_producer_epoch`` and gets
        the same answer."""
        wanted = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        preparing = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if bump:
            retried = self._txns.get(transactional_id)
            if (retried is not None and retried.state in (wanted, preparing)
                    and retried.last_producer_epoch == producer_epoch != retried.producer_epoch
                    and producer_id in (retried.producer_id, retried.previous_producer_id)):
                if retried.state is preparing and self._complete(retried).state.in_doubt:
                    raise _concurrent(retried)
                return self._txns[transactional_id].next_identity
        meta = self._current(transactional_id, producer_id, producer_epoch)
        if meta.state is TxnState.ONGOING:
            rotation = self._allocate() if bump and meta.epoch_exhausted else NO_PRODUCER_ID
            prepared = self._persist(meta.prepare_end(commit, self._clock(), bump=bump, next_producer_id=rotation))
            _after_the_answer(lambda: self._complete_if_current(prepared))
            return prepared.next_identity
        if meta.state is wanted:
            return meta.next_identity  # a retry of an EndTxn that succeeded (v4 and older keep the epoch)
        if meta.state is preparing:
            if self._complete(meta).state.in_doubt:  # its markers failed before: try again now
                raise _concurrent(meta)
            return self._txns[transactional_id].next_identity
        raise ApiError(kerr.InvalidTxnStateError,
                       f"{transactional_id!r} is {meta.state.kafka_name}: cannot {'commit' if commit else 'abort'}")

    def verify(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
               partition: TopicPartition) -> None:
        """KIP-890 part 1 (``handleVerifyPartitionsInTransaction``): transactional data is
        accepted only inside an Ongoing transaction that AddPartitionsToTxn gave this partition."""
        if not transactional_id:
            raise ApiError(kerr.InvalidRequestError, "a transactional batch needs a non-empty transactional id")
        meta = self._current(transactional_id, producer_id, producer_epoch)
        if meta.state.in_doubt:
            raise _concurrent(meta)
        if partition not in meta.partitions:
            raise ApiError(kerr.InvalidTxnStateError,
                           f"{partition[0]}-{partition[1]} was not added to the transaction of {transactional_id!r}")

    # -- background --------------------------------------------------------------------------

    def tick(self) -> None:
        """Retry the markers of in-doubt transactions and abort timed-out ones."""
        now = self._clock()
        for meta in list(self._txns.values()):
            if meta.state.in_doubt:
                self._complete(meta)
            elif meta.timed_out(now):
                log.info("%r: transaction of producer %d epoch %d timed out after %d ms; aborting it and fencing the epoch",
                         meta.transactional_id, meta.producer_id, meta.producer_epoch, meta.timeout_ms)
                try:
                    self._complete(self._persist(meta.fence(now)))
                except ApiError as exc:
                    log.error("%r: could not abort the timed-out transaction: %s", meta.transactional_id, exc)

    def remove_expired(self) -> None:
        """Forget every id idle for ``transactional.id.expiration.ms``, once their tombstones
        are persisted; if they cannot be, every id stays until the next run."""
        now = self._clock()
        expired = [tid for tid, meta in self._txns.items() if meta.expired(now, self.id_expiration_ms)]
        if not expired:
            return
        try:
            self._log.remove(expired)
        except OSError as exc:
            log.error("cannot persist the expiry of %d transactional ids, will retry: %s", len(expired), exc)
            return
        for transactional_id in expired:
            del self._txns[transactional_id]
        log.info("removed %d transactional ids idle for %d ms or more (transactional.id.expiration.ms), %d left",
                 len(expired), self.id_expiration_ms, len(self._txns))

    # -- internals --------------------------------------------------------------------------

    def _current(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TxnMetadata:
        """The id's state, if the caller is its current producer and epoch."""
        _check_id(transactional_id)
        meta = self._txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise ApiError(kerr.InvalidProducerIdMappingError,
                           f"{transactional_id!r} is not mapped to producer {producer_id}")
        if meta.producer_epoch != producer_epoch:
            raise ApiError(kerr.ProducerFencedError,
                           f"{transactional_id!r} producer {producer_id} is at epoch {meta.producer_epoch}, not {producer_epoch}")
        return meta

    def _next_epoch(self, meta: TxnMetadata, timeout_ms: int, expected: tuple[int, int] | None, now: int) -> TxnMetadata:
        """Kafka's ``prepareInitProducerIdTransit`` for an idle id."""
        if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
            last_epoch = meta.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
            return meta.rotate_producer_id(self._allocate(), timeout_ms, last_epoch, now)
        if expected is None:
            return meta.bump_epoch(timeout_ms, meta.producer_epoch + 1, NO_PRODUCER_EPOCH, now)
        expected_epoch = expected[1]
        if meta.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == meta.producer_epoch:
            return meta.bump_epoch(timeout_ms, meta.producer_epoch + 1, meta.producer_epoch, now)
        if expected_epoch == meta.last_producer_epoch:
            return meta.bump_epoch(timeout_ms, meta.producer_epoch, meta.last_producer_epoch, now)  # a retry
        raise ApiError(kerr.ProducerFencedError,
                       f"{meta.transactional_id!r} epoch {expected_epoch} is neither the current epoch"
                       f" {meta.producer_epoch} nor the previous {meta.last_producer_epoch}")

    def _persist(self, meta: TxnMetadata) -> TxnMetadata:
        try:
            self._log.append(meta)
        except OSError as exc:
            log.error("cannot persist the state of %r: %s", meta.transactional_id, exc)
            raise ApiError(kerr.CoordinatorNotAvailableError, f"transaction state not persisted: {exc}") from exc
        self._txns[meta.transactional_id] = meta
        return meta

    def _complete_if_current(self, prepared: TxnMetadata) -> None:
        """The markers of ``prepared``, unless a request wrote them meanwhile (a retried EndTxn,
        an InitProducerId) or :meth:`tick` will (they failed)."""
        if self._txns.get(prepared.transactional_id) is prepared:
            self._complete(prepared)

    def _complete(self, meta: TxnMetadata) -> TxnMetadata:
        """Write the markers of an in-doubt transaction and persist its completion; on failure it stays in doubt."""
        commit = meta.state is TxnState.PREPARE_COMMIT
        try:
            self._markers.write_markers(meta.partitions, meta.producer_id, meta.producer_epoch, commit=commit,
                                        coordinator_epoch=COORDINATOR_EPOCH)
            return self._persist(meta.complete(self._clock()))
        except (ApiError, LogError, OSError) as exc:
            log.error("%r: %s markers not all written, will retry: %s",
                      meta.transactional_id, "COMMIT" if commit else "ABORT", exc)
            return meta


def _after_the_answer(write: Callable[[], object]) -> None:
    """Run ``write`` once the request being handled is answered: on the broker's event loop, at
    its next turn (callbacks run in order, so before any later request is read); outside one,
    now."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        write()
        return
    loop.call_soon(write)


def _check_id(transactional_id: str) -> None:
    if not transactional_id:
        raise ApiError(kerr.InvalidRequestError, "the transactional id must not be empty")


def _may_continue(meta: TxnMetadata, producer_id: int, epoch: int) -> bool:
    """Kafka's ``isValidProducerId``: a producer that knows its id and epoch may resume unless fenced."""
    return (meta.producer_epoch == NO_PRODUCER_EPOCH or producer_id == meta.producer_id
            or (producer_id == meta.previous_producer_id and is_epoch_exhausted(epoch)))


def _concurrent(meta: TxnMetadata) -> ApiError:
    return ApiError(kerr.ConcurrentTransactionsError,
                    f"{meta.transactional_id!r} is {meta.state.kafka_name}: its markers are still being written")
