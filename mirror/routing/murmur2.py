"""Kafka's key hash, so a mirrored key lands where a Java producer would have put it.

``murmur2`` is Kafka's ``Utils.murmur2`` (MurmurHash2, seed ``0x9747b28c``) on Java's
signed 32-bit ints; ``partition_for_key`` is ``BuiltInPartitioner.partitionForKey``, the
keyed branch of the Java producer's default partitioner (``DefaultPartitioner`` before
KIP-794): ``Utils.toPositive(Utils.murmur2(key)) % numPartitions``. An empty key is a key
(it hashes); only a null key takes the unkeyed path, and that path is the router's business.
"""

from __future__ import annotations

import struct

from .policy import RoutingError

__all__ = ["murmur2", "partition_for_key"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK = 0xFFFFFFFF


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's ``Utils.murmur2`` of ``data``, as the signed 32-bit int Java returns."""
    length = len(data)
    h = _SEED ^ length
    # Java reads each 4-byte block little-endian; unpacking them in one call keeps the loop short.
    for k in struct.unpack_from(f"<{length >> 2}I", data):
        k = (k * _M) & _MASK
        k ^= k >> _R
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:  # Java's switch falls through from case 3 to case 1
        end = length - tail
        if tail == 3:
            h ^= data[end + 2] << 16
        if tail >= 2:
            h ^= data[end + 1] << 8
        h = ((h ^ data[end]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def partition_for_key(key: bytes | bytearray | memoryview, partitions: int) -> int:
    """The partition Kafka's default partitioner gives a non-null ``key`` among ``partitions``."""
    if partitions < 1:
        raise RoutingError(f"a topic has at least one partition, not {partitions}")
    # Utils.toPositive masks the sign bit (it is not abs(): abs(MIN_VALUE) would stay negative).
    return (murmur2(key) & 0x7FFFFFFF) % partitions
