"""RoutingPolicy accepts config strings and refuses what the router could not honour."""

from __future__ import annotations

import dataclasses

import pytest

from kcodecs import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, KMirrorError, UnsupportedCodecError
from mirror.routing import Partitioning, RouteClass, RoutingError, RoutingPolicy


def test_defaults():
    policy = RoutingPolicy(destination_partitions=3)
    assert policy.partitioning is Partitioning.BY_KEY
    assert policy.compression is None
    assert policy.max_decompressed_size == DEFAULT_MAX_DECOMPRESSED_SIZE


def test_config_strings_become_enums():
    policy = RoutingPolicy(partitioning="preserve", destination_partitions=2, compression="ZSTD")
    assert policy.partitioning is Partitioning.PRESERVE
    assert policy.compression is Compression.ZSTD
    assert RoutingPolicy(destination_partitions=1, compression="none").compression is Compression.NONE


def test_counter_names_are_the_enum_values():
    assert [c.value for c in RouteClass] == ["passed-through", "inspected", "coalesced", "rebuilt", "dropped", "aborted"]


@pytest.mark.parametrize(
    "options",
    [
        {"destination_partitions": 0},
        {"destination_partitions": -1},
        {"destination_partitions": 2.0},
        {"destination_partitions": True},
        {"destination_partitions": 2, "partitioning": "round-robin"},
        {"destination_partitions": 2, "max_decompressed_size": -1},
    ],
)
def test_invalid_policies(options):
    with pytest.raises(RoutingError) as info:
        RoutingPolicy(**options)
    assert isinstance(info.value, KMirrorError) and isinstance(info.value, ValueError)


def test_unknown_codec():
    with pytest.raises(UnsupportedCodecError):
        RoutingPolicy(destination_partitions=1, compression="brotli")


def test_frozen_and_keyword_only():
    policy = RoutingPolicy(destination_partitions=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.destination_partitions = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        RoutingPolicy(Partitioning.BY_KEY, 3)  # type: ignore[misc]
