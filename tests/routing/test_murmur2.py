"""murmur2 and key placement against Kafka's own test vectors and kafka-python's partitioner."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as their_murmur2

from mirror.routing import RoutingError, murmur2, partition_for_key

# Kafka's UtilsTest.testMurmur2 (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java),
# signed as Java returns them.
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("data, expected", KAFKA_VECTORS.items(), ids=[k.decode() for k in KAFKA_VECTORS])
def test_kafka_utils_vectors(data, expected):
    assert murmur2(data) == expected


def test_any_bytes_like_key():
    for data in KAFKA_VECTORS:
        assert murmur2(bytearray(data)) == murmur2(memoryview(data)) == murmur2(data)


@pytest.mark.interop
@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_matches_kafka_python(data):
    # kafka-python returns the same 32 bits unsigned; Java (and we) return them signed.
    assert murmur2(data) & 0xFFFFFFFF == their_murmur2(data)
    assert -(1 << 31) <= murmur2(data) < (1 << 31)


@pytest.mark.interop
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(min_value=1, max_value=10_000))
def test_partition_matches_kafka_python_default_partitioner(key, partitions):
    # kafka.partitioner.default.DefaultPartitioner.partition, keyed branch.
    assert partition_for_key(key, partitions) == (their_murmur2(key) & 0x7FFFFFFF) % partitions


def test_empty_key_is_a_key():
    # Java hashes a non-null empty array; only a null key takes the unkeyed path.
    assert murmur2(b"") == 275646681
    assert partition_for_key(b"", 1000) == 275646681 % 1000


def test_sign_bit_is_masked_not_negated():
    # Utils.toPositive(n) = n & 0x7fffffff, which differs from abs() for negative hashes.
    key = b"21"
    assert murmur2(key) < 0
    assert partition_for_key(key, 1 << 31) == murmur2(key) & 0x7FFFFFFF
    assert partition_for_key(key, 1 << 31) != abs(murmur2(key))


@pytest.mark.parametrize("partitions", [0, -3])
def test_partition_count_must_be_positive(partitions):
    with pytest.raises(RoutingError):
        partition_for_key(b"k", partitions)
