"""Routing: which destination partition each source batch goes to, and how cheaply.

Pure code over kcodecs batches, no I/O: :func:`route_batch` classifies a batch as passed
through, inspected, rebuilt, dropped or aborted and returns the v2 batches to produce;
:func:`coalesce` merges a run of small batches;
:class:`ReadCommitted` tells which batches of a fetch belong to aborted transactions;
:class:`RouteCounters` adds up the classes. See ``docs/routing.md``.
"""

from .counters import ClassCounts, RouteCounters
from .murmur2 import murmur2, partition_for_key
from .coalescer import coalesce
from .policy import (DEFAULT_COALESCE_BELOW_BYTES, DEFAULT_COALESCE_TARGET_BYTES, Partitioning, RouteClass,
                     RoutingError, RoutingPolicy)
from .router import Outgoing, Routed, home_partition, passes_through, route_batch
from .transactions import ReadCommitted

__all__ = [
    "route_batch",
    "coalesce",
    "DEFAULT_COALESCE_BELOW_BYTES",
    "DEFAULT_COALESCE_TARGET_BYTES",
    "passes_through",
    "home_partition",
    "ReadCommitted",
    "Routed",
    "Outgoing",
    "RoutingPolicy",
    "Partitioning",
    "RouteClass",
    "RoutingError",
    "RouteCounters",
    "ClassCounts",
    "murmur2",
    "partition_for_key",
]
