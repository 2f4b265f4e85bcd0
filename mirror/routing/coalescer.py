"""Coalesce a run of small source batches of one partition into few destination batches.

kmirror's costs are per batch, and so are the destination broker's and every consumer's:
a producer with little traffic or ``linger.ms=0`` writes batches of one or two records, and
forwarding them one to one pays every per-batch cost on each (docs/routing.md, "Coalesced").
A run of such batches, as one fetch returned them, is merged instead: their records, in
order, keys, values, headers and CreateTimes kept byte for byte, go into one new batch per
destination partition, compressed with the source's codec (or the policy's). Only the
record framing is new: lengths, timestamp deltas from the new first record, and offset
deltas 0..n-1 (the destination assigns offsets, KIP-31). Nothing waits for more data: the
caller hands over what one fetch already holds (:mod:`mirror.engine.fetched_set`).
"""

from __future__ import annotations

from typing import Sequence

from kcodecs import RecordBytes, V2Batch, build_from_record_bytes, record_bytes

from .murmur2 import partition_for_key
from .policy import Partitioning, RouteClass, RoutingPolicy
from .router import Outgoing, Routed, home_partition

__all__ = ["coalesce"]


def coalesce(batches: Sequence[V2Batch], source_partition: int, policy: RoutingPolicy) -> Routed:
    """One :data:`RouteClass.COALESCED` result for ``batches``: consecutive data batches of
    ``source_partition`` (checked, committed, no control batch; the caller chose them with
    :meth:`RoutingPolicy.coalesces`), all in one codec.

    Under ``preserve`` every record goes to the home partition; under ``by-key`` each to its
    key's partition (a null key to the home partition), so there is one outgoing batch per
    destination partition, records in source order within each. The no-keys flag is set
    on every batch whose records have no key: when every merged batch had it, and also when
    the merge proves it (as a rebuild does, seed 000).
    """
    home = home_partition(source_partition, policy)
    codec = batches[0].compression if policy.compression is None else policy.compression
    records: list[RecordBytes] = []
    for batch in batches:
        records += record_bytes(batch, max_size=policy.max_decompressed_size)
    source_bytes = sum(batch.size for batch in batches)
    if policy.partitioning is Partitioning.PRESERVE:
        groups = {home: records}
    else:
        groups = _by_key(records, home, policy.destination_partitions)
    outgoing = tuple(
        Outgoing(partition, build_from_record_bytes(group, compression=codec,
                                                    no_keys_flag=all(record.key is None for record in group)),
                 len(group))
        for partition, group in sorted(groups.items()) if group
    )
    return Routed(RouteClass.COALESCED, outgoing, len(records), source_bytes)


def _by_key(records: list[RecordBytes], home: int, partitions: int) -> dict[int, list[RecordBytes]]:
    groups: dict[int, list[RecordBytes]] = {}
    seen: dict[bytes, int] = {}
    for record in records:
        key = record.key
        if key is None:
            target = home
        else:
            target = seen.get(key)
            if target is None:
                target = seen[key] = partition_for_key(key, partitions)
        groups.setdefault(target, []).append(record)
    return groups
