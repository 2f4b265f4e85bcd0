"""What the user chose (partitioning, codec, decompression cap) and the names of the routing classes."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from kcodecs import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, KMirrorError

__all__ = ["Partitioning", "RouteClass", "RoutingPolicy", "RoutingError", "DEFAULT_COALESCE_BELOW_BYTES",
           "DEFAULT_COALESCE_TARGET_BYTES"]

DEFAULT_COALESCE_BELOW_BYTES = 4096
"""The job's default threshold (``coalesce_below_bytes``), where coalescing was measured to pay
for the mirror itself with lz4 and zstd on Apache Kafka: batches of 1 KiB records from a 4 KiB
``batch.size`` (a little under 4 KiB stored) copied faster merged than forwarded, and those
from an 8 KiB one did not with zstd (figures: docs/performance.md, "Small source batches").
The embedded broker, whose cost per batch is lower, would have put it at 2 KiB: real Kafka
decides."""
DEFAULT_COALESCE_TARGET_BYTES = 65536


class RoutingError(KMirrorError, ValueError):
    """A policy or a source partition the router cannot honour: a misconfiguration, not bad data."""


class Partitioning(str, Enum):
    """How the destination partition is chosen (``--partitioning``)."""

    BY_KEY = "by-key"
    """murmur2(key) mod destination partitions, like Kafka's default partitioner; unkeyed records
    keep their source partition number modulo the destination count."""
    PRESERVE = "preserve"
    """Destination partition = source partition; needs at least as many destination partitions."""


class RouteClass(str, Enum):
    """What happened to a source batch, cheapest first; the values name the counters."""

    PASSED_THROUGH = "passed-through"
    """Forwarded without decompressing."""
    INSPECTED = "inspected"
    """Decompressed to read the keys, then the original bytes forwarded."""
    COALESCED = "coalesced"
    """One of a run of small batches whose records were merged into few destination batches."""
    REBUILT = "rebuilt"
    """Decoded and built again as new v2 batches (split by partition, recompressed)."""
    DROPPED = "dropped"
    """Not forwarded: a transaction marker, or a batch compaction left empty."""
    ABORTED = "aborted"
    """Not forwarded: data of a transaction the source aborted (read_committed, :mod:`.transactions`)."""


@dataclass(frozen=True, kw_only=True)
class RoutingPolicy:
    """The routing choices for one destination topic.

    ``compression=None`` keeps each source batch's codec, so batches can be forwarded as they
    are; naming a codec forces every batch in another codec to be rebuilt.
    ``partitioning`` and ``compression`` also accept their config strings ("by-key", "zstd").

    A source batch smaller than ``coalesce_below_bytes`` (0: never) is merged with the small
    batches after it in the same fetch, up to ``coalesce_target_bytes`` of source batches
    (:mod:`.coalescer`). With ``coalesce_under_backlog``, while the batches of a destination
    partition queue behind its requests in flight, every batch smaller than
    ``coalesce_target_bytes`` is merged so (:meth:`coalesces_below`).
    """

    partitioning: Partitioning = Partitioning.BY_KEY
    destination_partitions: int
    compression: Compression | None = None
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
    coalesce_below_bytes: int = 0
    coalesce_target_bytes: int = DEFAULT_COALESCE_TARGET_BYTES
    coalesce_under_backlog: bool = False

    def coalesces_below(self, backlog: bool) -> int:
        """The size under which a source batch is merged with the ones after it (0: none is).

        A Produce request carries one batch per partition (v3 and later) and a producer keeps
        five requests in flight, so forwarding source batches one to one caps a partition at
        five source batches a round trip. That is plenty while the destination keeps up; once
        a partition's batches queue (a slow answer, a burst), the queue drains only as fast as
        it grew, and every record behind it waits. Java's producer fills ``batch.size`` from its
        queue then; this merges the queued-to-be batches instead, so one round trip drains a
        backlog. Without a backlog the batches go as they are, byte for byte."""
        if backlog and self.coalesce_under_backlog:
            return self.coalesce_target_bytes
        return self.coalesce_below_bytes

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "partitioning", Partitioning(self.partitioning))
        except ValueError as exc:
            choices = ", ".join(p.value for p in Partitioning)
            raise RoutingError(f"partitioning must be one of {choices}, not {self.partitioning!r}") from exc
        if self.compression is not None:
            object.__setattr__(self, "compression", Compression.parse(self.compression))
        if isinstance(self.destination_partitions, bool) or not isinstance(self.destination_partitions, int):
            raise RoutingError(f"destination_partitions must be an int, not {self.destination_partitions!r}")
        if self.destination_partitions < 1:
            raise RoutingError(f"destination_partitions must be at least 1, not {self.destination_partitions}")
        if self.max_decompressed_size < 0:
            raise RoutingError(f"max_decompressed_size must not be negative, not {self.max_decompressed_size}")
        if self.coalesce_below_bytes < 0:
            raise RoutingError(f"coalesce_below_bytes must not be negative, not {self.coalesce_below_bytes}")
        if self.coalesce_below_bytes and self.coalesce_target_bytes < self.coalesce_below_bytes:
            raise RoutingError(f"coalesce_target_bytes ({self.coalesce_target_bytes}) must be at least "
                               f"coalesce_below_bytes ({self.coalesce_below_bytes})")
