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
"""

from __future__ import annotations

import functools
import itertools
import random
from dataclasses import dataclass
from enum import Enum
from typing import Iterator

import kcodecs
from kcodecs import Compression, Record

__all__ = ["Layout", "DataSpec", "Dataset", "Corpus", "event_value", "build_dataset"]

BASE_TIMESTAMP_MS = 1_700_000_000_000
_EVENT_TYPES = (b"view", b"click", b"add_to_cart", b"purchase", b"search", b"login", b"logout", b"share")
_USERS = 50_000
_VOCABULARY = 5_000
_CORPUS_BYTES = 4 * 1024 * 1024


class Layout(str, Enum):
    """How one source topic holds the data set."""

    FLAGGED = "flagged"
    UNFLAGGED = "unflagged"
    KEYED = "keyed"


@dataclass(frozen=True)
class DataSpec:
    """What to generate: about ``total_bytes`` of values of ``record_bytes`` each, in batches of
    about ``batch_bytes`` (uncompressed), spread round-robin over ``partitions``."""

    codec: Compression
    record_bytes: int
    total_bytes: int
    batch_bytes: int = 128 * 1024
    keyed_ratio: float = 1.0
    partitions: int = 1
    seed: int = 42

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
    def records_per_batch(self) -> int:
        return max(1, self.batch_bytes // self.record_bytes)


@dataclass(frozen=True)
class Dataset:
    """One layout's batches, ready to produce, and what they hold."""

    layout: Layout
    batches: tuple[tuple[int, bytes], ...]
    """``(partition, v2 batch)`` in produce order."""
    records: int
    payload_bytes: int
    """Key and value bytes: the data's uncompressed size, the basis of MB/s and CPU s/GB."""

    @property
    def wire_bytes(self) -> int:
        """Bytes the source broker stores and serves: the batches as built, compressed."""
        return sum(len(batch) for _, batch in self.batches)

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


def event_value(rng: random.Random, corpus: Corpus, index: int, size: int) -> tuple[int, bytes]:
    """``(user, value)``: one event of exactly ``size`` bytes (the envelope is cut for tiny sizes)."""
    user = rng.randrange(_USERS)
    head = b'{"id":%d,"ts":%d,"user":"user-%05d","type":"%s","amount":%d.%02d,"text":"' % (
        index, BASE_TIMESTAMP_MS + index, user, rng.choice(_EVENT_TYPES), rng.randrange(500), rng.randrange(100))
    room = size - len(head) - 2
    if room <= 0:
        return user, (head + b'"}')[:size]
    return user, head + corpus.slice(rng, room) + b'"}'


def _records(spec: DataSpec, keyed: bool) -> Iterator[Record]:
    rng, keys = random.Random(spec.seed), random.Random(spec.seed + 1)
    corpus = _corpus(spec.seed)
    for index in range(spec.records):
        user, value = event_value(rng, corpus, index, spec.record_bytes)
        key = b"user-%05d" % user if keyed and keys.random() < spec.keyed_ratio else None
        yield Record(key=key, value=value, timestamp=BASE_TIMESTAMP_MS + index)


def build_dataset(spec: DataSpec, layout: Layout) -> Dataset:
    """The data set of ``spec`` as ``layout``; the same spec always gives the same bytes."""
    layout = Layout(layout)
    records = _records(spec, keyed=layout is Layout.KEYED)
    batches: list[tuple[int, bytes]] = []
    count = payload = 0
    for number in itertools.count():
        group = list(itertools.islice(records, spec.records_per_batch))
        if not group:
            break
        count += len(group)
        payload += sum(len(r.key or b"") + len(r.value or b"") for r in group)
        # mark_no_keys=False is what every other client does: the bit is kmirror's own (seed 000).
        data = kcodecs.build_batch(group, compression=spec.codec, mark_no_keys=layout is Layout.FLAGGED)
        batches.append((number % spec.partitions, data))
    return Dataset(layout, tuple(batches), count, payload)
