"""Source data for ``kmirror bench mirror``: deterministic, and compressible like real events.

A value is a JSON-like event of exactly ``record_bytes`` bytes: an envelope with ids, a
timestamp, a user, an event type and an amount, then a ``text`` field cut from a corpus of
Zipf-distributed words. Codecs then shrink it about as much as real event streams (see the
ratios in ``docs/performance.md``), unlike all-zero payloads (which compress 100x and
flatter every codec) or random bytes (which do not compress at all). Everything follows
from the seed, so every mode and every run copies the same bytes.

Three layouts of one data set are built, one source topic each:

* ``flagged``: unkeyed, built by kcodecs with the no-keys flag (what kmirror's producer writes);
* ``unflagged``: the same records without the flag, as librdkafka or the Java client write them;
* ``keyed``: the same values, ``keyed_ratio`` of them keyed by their event's user.

Batches are filled the way the Java producer fills them (``RecordAccumulator`` with
``MemoryRecordsBuilder``): records go in while the batch's *estimated stored* size stays
within ``batch_bytes``, the estimate being the uncompressed size times the compression ratio
of the batch before, times 1.05 (``COMPRESSION_RATE_ESTIMATION_FACTOR``); a record bigger
than that gets a batch of its own. So ``--batch-kib 16`` gives the batches a Java producer
with its default ``batch.size`` writes: about 16 KiB stored, holding 2-4x that in records
when a codec compresses. Measured with 1 KiB records, stored batches average 88-95% of
``batch_bytes`` (the margin, the first batch's guess and the record that did not fit); 10 KiB
records fill 16 KiB batches with 1-4 records, 63-88%. A built batch over ``batch_bytes`` is
cut short and rebuilt, so none is (unless one record is bigger).
"""

from __future__ import annotations

import functools
import itertools
import random
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Iterator

import kcodecs
from kcodecs import Compression, Record

from ..routing import DEFAULT_COALESCE_BELOW_BYTES, partition_for_key

__all__ = ["Layout", "DataSpec", "Dataset", "Corpus", "event_value", "build_dataset"]

BASE_TIMESTAMP_MS = 1_700_000_000_000
"""The first record's timestamp unless a spec gives one (November 2023): fixed, so that a spec
always gives the same bytes. ``kmirror bench mirror`` stamps its data with the time it runs
instead (:attr:`DataSpec.base_timestamp_ms`)."""
_EVENT_TYPES = (b"view", b"click", b"add_to_cart", b"purchase", b"search", b"login", b"logout", b"share")
_USERS = 50_000
_VOCABULARY = 5_000
_CORPUS_BYTES = 4 * 1024 * 1024
_BATCH_OVERHEAD = 61
"""A v2 batch header, log overhead included (``DefaultRecordBatch.RECORD_BATCH_OVERHEAD``)."""
_RECORD_OVERHEAD = 12
"""A record's varints and attributes byte, at most, for these sizes (9-12 bytes). A rough figure
is enough: the ratio learned from each built batch absorbs the error."""
_ESTIMATION_FACTOR = 1.05
"""Java's ``MemoryRecordsBuilder.COMPRESSION_RATE_ESTIMATION_FACTOR``: the margin that keeps a
batch within ``batch.size`` when the next records compress a little worse than the last."""


class Layout(str, Enum):
    """How one source topic holds the data set."""

    FLAGGED = "flagged"
    UNFLAGGED = "unflagged"
    KEYED = "keyed"


@dataclass(frozen=True)
class DataSpec:
    """What to generate: about ``total_bytes`` of values of ``record_bytes`` each, in batches of
    about ``batch_bytes`` as stored (compressed; the Java producer's ``batch.size``, 16 KiB by
    default), spread round-robin over ``partitions``."""

    codec: Compression
    record_bytes: int
    total_bytes: int
    batch_bytes: int = 16 * 1024
    keyed_ratio: float = 1.0
    partitions: int = 1
    seed: int = 42
    base_timestamp_ms: int = BASE_TIMESTAMP_MS
    """The first record's timestamp (CreateTime); record ``i`` has ``base_timestamp_ms + i``,
    in its header and in its value's ``ts``. Data older than a destination topic's retention
    (7 days by default) is deleted there as soon as a newer batch rolls its segment, as in
    Kafka: a transaction's commit marker does, so a copy stamped in 2023 lost its own segments
    at its commit. The mirror bench therefore stamps its data with the time it runs."""

    def __post_init__(self) -> None:
        if self.record_bytes < 1 or self.total_bytes < self.record_bytes or self.batch_bytes < 1:
            raise ValueError(f"record_bytes ({self.record_bytes}) must be at least 1 and at most total_bytes "
                             f"({self.total_bytes}); batch_bytes ({self.batch_bytes}) at least 1")
        if not 0 < self.keyed_ratio <= 1:
            raise ValueError(f"keyed_ratio must be in (0, 1], not {self.keyed_ratio}: the keyed topic needs keys")
        if self.partitions < 1:
            raise ValueError(f"partitions must be at least 1, not {self.partitions}")

    @property
    def records(self) -> int:
        return self.total_bytes // self.record_bytes

    @property
    def repartitioned(self) -> int:
        """The partition count the keyed layout is copied into (the recompress mode): one more
        than the source, so that partitioning by key moves records."""
        return self.partitions + 1


@dataclass(frozen=True)
class Dataset:
    """One layout's batches, ready to produce, and what they hold."""

    layout: Layout
    batches: tuple[tuple[int, bytes], ...]
    """``(partition, v2 batch)`` in produce order."""
    records: int
    payload_bytes: int
    """Key and value bytes: the data's uncompressed size, the basis of MB/s and CPU s/GB."""
    split_records: int
    """Records in batches whose keys route to more than one of ``spec.repartitioned``
    partitions by key: the batches the engine must rebuild. It forwards the others whole."""

    @property
    def wire_bytes(self) -> int:
        """Bytes the source broker stores and serves: the batches as built, compressed."""
        return sum(len(batch) for _, batch in self.batches)

    @property
    def small_records(self) -> int:
        """Records in batches that ``kmirror run`` coalesces by default (under
        ``coalesce_below_bytes``): what the coalesced mode must merge."""
        below = DEFAULT_COALESCE_BELOW_BYTES
        return sum(kcodecs.read_batch(batch).record_count for _, batch in self.batches if len(batch) < below)

    @property
    def mean_batch_bytes(self) -> float:
        """The mean stored batch size: what ``batch_bytes`` asked for, as it came out."""
        return self.wire_bytes / len(self.batches)

    def end_offsets(self, partitions: int) -> tuple[int, ...]:
        """Each partition's log end offset once every batch is produced (offsets start at 0)."""
        ends = [0] * partitions
        for partition, batch in self.batches:
            ends[partition] += kcodecs.read_batch(batch).record_count
        return tuple(ends)


class Corpus:
    """Text of Zipf-distributed made-up words (s = 1.1, like word frequencies in prose)."""

    def __init__(self, seed: int, size: int = _CORPUS_BYTES):
        rng = random.Random(seed)
        letters = "etaoinshrdlcumwfgypbvkjxqz"
        vocabulary = ["".join(rng.choices(letters, weights=range(26, 0, -1), k=rng.randint(2, 10)))
                      for _ in range(_VOCABULARY)]
        weights = list(itertools.accumulate(1 / rank**1.1 for rank in range(1, _VOCABULARY + 1)))
        words = rng.choices(vocabulary, cum_weights=weights, k=size // 4)
        self.text = " ".join(words).encode()[:size]

    def slice(self, rng: random.Random, size: int) -> bytes:
        start = rng.randrange(len(self.text) - size) if size < len(self.text) else 0
        return self.text[start : start + size]


@functools.lru_cache(maxsize=2)
def _corpus(seed: int) -> Corpus:
    """Every layout and scenario of a run draws from the same corpus: build it once."""
    return Corpus(seed)


def event_value(rng: random.Random, corpus: Corpus, index: int, size: int,
                base_timestamp_ms: int = BASE_TIMESTAMP_MS) -> tuple[int, bytes]:
    """``(user, value)``: one event of exactly ``size`` bytes (the envelope is cut for tiny sizes)."""
    user = rng.randrange(_USERS)
    head = b'{"id":%d,"ts":%d,"user":"user-%05d","type":"%s","amount":%d.%02d,"text":"' % (
        index, base_timestamp_ms + index, user, rng.choice(_EVENT_TYPES), rng.randrange(500), rng.randrange(100))
    room = size - len(head) - 2
    if room <= 0:
        return user, (head + b'"}')[:size]
    return user, head + corpus.slice(rng, room) + b'"}'


def _records(spec: DataSpec, keyed: bool) -> Iterator[Record]:
    rng, keys = random.Random(spec.seed), random.Random(spec.seed + 1)
    corpus = _corpus(spec.seed)
    for index in range(spec.records):
        user, value = event_value(rng, corpus, index, spec.record_bytes, spec.base_timestamp_ms)
        key = b"user-%05d" % user if keyed and keys.random() < spec.keyed_ratio else None
        yield Record(key=key, value=value, timestamp=spec.base_timestamp_ms + index)


def build_dataset(spec: DataSpec, layout: Layout) -> Dataset:
    """The data set of ``spec`` as ``layout``; the same spec always gives the same bytes."""
    layout = Layout(layout)
    records = _records(spec, keyed=layout is Layout.KEYED)
    batches: list[tuple[int, bytes]] = []
    count = payload = split = 0
    # mark_no_keys=False is what every other client does: the bit is kmirror's own (seed 000).
    for number, (group, data) in enumerate(_batches(spec, records, mark_no_keys=layout is Layout.FLAGGED)):
        partition = number % spec.partitions
        count += len(group)
        payload += sum(len(r.key or b"") + len(r.value or b"") for r in group)
        split += len(group) if _splits(group, partition, spec.repartitioned) else 0
        batches.append((partition, data))
    return Dataset(layout, tuple(batches), count, payload, split)


def _batches(spec: DataSpec, records: Iterator[Record], mark_no_keys: bool) -> Iterator[tuple[list[Record], bytes]]:
    """Fill and build batches as the Java producer does (see the module docstring)."""
    build = functools.partial(kcodecs.build_batch, compression=spec.codec, mark_no_keys=mark_no_keys)
    ratio = 1.0  # stored bytes per estimated record byte; Java's CompressionRatioEstimator starts at 1 too
    queue: list[Record] = []
    estimate = 0
    for record in records:
        size = _estimated_size(record)
        if queue and _BATCH_OVERHEAD + (estimate + size) * ratio * _ESTIMATION_FACTOR > spec.batch_bytes:
            used, data = _build_within(queue, spec.batch_bytes, build)
            yield queue[:used], data
            ratio = (len(data) - _BATCH_OVERHEAD) / sum(map(_estimated_size, queue[:used]))
            queue = queue[used:]
            estimate = sum(map(_estimated_size, queue))
        queue.append(record)
        estimate += size
    while queue:
        used, data = _build_within(queue, spec.batch_bytes, build)
        yield queue[:used], data
        queue = queue[used:]


def _estimated_size(record: Record) -> int:
    return _RECORD_OVERHEAD + len(record.key or b"") + len(record.value or b"")


def _build_within(group: list[Record], limit: int, build: Callable[[list[Record]], bytes]) -> tuple[int, bytes]:
    """``(records used, batch)``: ``group`` built, or its longest head that stays within ``limit``
    stored bytes (one record at least). Where Java's producer splits a batch the broker refused
    as too large, this keeps a 1 MiB batch within the broker's ``max.message.bytes``."""
    used, data = len(group), build(group)
    while len(data) > limit and used > 1:
        used -= 1
        data = build(group[:used])
    return used, data


@functools.lru_cache(maxsize=_USERS)
def _partition_for(key: bytes, partitions: int) -> int:
    """Keys repeat (one per user): hash each once."""
    return partition_for_key(key, partitions)


def _splits(group: list[Record], source_partition: int, partitions: int) -> bool:
    """Whether partitioning by key sends ``group`` to more than one of ``partitions``. A null key
    stays at the source partition mod ``partitions``, as in :mod:`mirror.routing.router`."""
    home = source_partition % partitions
    return len({home if r.key is None else _partition_for(r.key, partitions) for r in group}) > 1
