"""Replication policies, table-tested against MirrorMaker 2's own examples
(MirrorSourceConnectorTest.testNoCycles, DefaultReplicationPolicyTest, IdentityReplicationPolicyTest)."""

from __future__ import annotations

import pytest

from mirror.replication import IdentityPolicy, PrefixPolicy, RenamePolicy, alias_of, is_cycle

PREFIX = PrefixPolicy()


@pytest.mark.parametrize("topic, expected", [
    # MirrorSourceConnectorTest.testNoCycles, for a connector source -> target
    ("target.topic1", True),
    ("target.source.topic1", True),
    ("source.target.topic1", True),
    ("topic1", False),
    ("source.topic1", False),
])
def test_prefix_policy_finds_cycles_as_mirrormaker_2_does(topic, expected):
    assert is_cycle(PREFIX, topic, "target") is expected


@pytest.mark.parametrize("alias, topic, remote, source, upstream", [
    ("a", "orders", "a.orders", "a", "orders"),
    ("b", "a.orders", "b.a.orders", "b", "a.orders"),
])
def test_prefix_policy_names(alias, topic, remote, source, upstream):
    assert PREFIX.remote_topic(alias, topic) == remote
    assert PREFIX.topic_source(remote) == source
    assert PREFIX.upstream_topic(remote) == upstream


@pytest.mark.parametrize("policy", [IdentityPolicy(), RenamePolicy("mirror.{topic}")])
def test_names_that_do_not_tell_their_origin_are_never_cycles_by_name(policy):
    remote = policy.remote_topic("a", "orders")
    assert remote == ("orders" if isinstance(policy, IdentityPolicy) else "mirror.orders")
    assert policy.topic_source(remote) is None
    assert not is_cycle(policy, "target.orders", "target")


@pytest.mark.parametrize("bootstrap, alias", [
    ("127.0.0.1:9092", "127-0-0-1-9092"),
    ("kafka-1.example.com:9093,kafka-2.example.com:9093", "kafka-1-example-com-9093"),
    ("[::1]:9092", "1-9092"),
])
def test_a_derived_alias_never_holds_the_separator(bootstrap, alias):
    assert alias_of(bootstrap) == alias
    assert "." not in alias_of(bootstrap)
