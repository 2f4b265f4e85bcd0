"""Replication policies, table-tested against MirrorMaker 2's own examples
(MirrorSourceConnectorTest.testNoCycles, DefaultReplicationPolicyTest, IdentityReplicationPolicyTest)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from mirror.config import ClusterConfig, Clusters
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


@pytest.mark.parametrize("separator, remote, cyclic", [
    ("_", "a_orders", "target_a_orders"),
    ("__", "a__my_orders", "target__a__my_orders"),   # a multi-character separator, as MM2 allows
    ("-", "a-orders", "target-a-orders"),
])
def test_prefix_policy_with_another_separator(separator, remote, cyclic):
    """DefaultReplicationPolicy with replication.policy.separator: the alias, the separator, the
    name; the source is what comes before the first separator."""
    policy = PrefixPolicy(separator)
    topic = remote.split(separator, 1)[1]
    assert policy.remote_topic("a", topic) == remote
    assert (policy.topic_source(remote), policy.upstream_topic(remote)) == ("a", topic)
    assert is_cycle(policy, cyclic, "target") and not is_cycle(policy, remote, "target")
    assert policy.topic_source("orders") is None


def _clusters(**values) -> Clusters:
    return Clusters(source=ClusterConfig(bootstrap=("a:1",)), destination=ClusterConfig(bootstrap=("b:1",)),
                    topics=".*", **values)


def test_the_separator_names_prefixed_topics_and_finds_cycles():
    clusters = _clusters(replication_policy="prefix", source_alias="eu", destination_alias="us",
                         replication_separator="_")
    assert clusters.destination_topic("orders") == "eu_orders"
    assert not clusters.selects("us_orders")   # came from the destination
    assert clusters.selects("us.orders")       # '.' separates nothing here


@pytest.mark.parametrize("values, message", [
    ({"replication_separator": ""}, "replication_separator"),
    ({"replication_separator": "/"}, "part of topic names"),
    ({"replication_policy": "prefix", "source_alias": "eu_west", "replication_separator": "_"},
     "contains the replication separator"),
    # a derived alias (a-1) holds '-': name the clusters
    ({"replication_policy": "prefix", "replication_separator": "-"}, "contains the replication separator"),
])
def test_a_separator_kafka_or_the_aliases_cannot_take_is_refused(values, message):
    with pytest.raises(ValidationError, match=message):
        _clusters(**values)


def test_under_identity_the_separator_constrains_no_alias():
    assert _clusters(source_alias="eu_west", replication_separator="_").destination_topic("orders") == "orders"
