"""Which source topic ACLs a destination gets (mirror.engine.acl_sync), by MirrorMaker 2's
rules, table-tested from MirrorSourceConnectorTest (``testAclFiltering``,
``testAclTransformation``: principal "kafka", host "", topic "test_topic" from cluster
"source", named "source.test_topic" by DefaultReplicationPolicy) and from
``syncTopicAcls``' filters; and a cluster without an authorizer, which syncs nothing and says
so once. Real Kafka with ACLs: tests/realkafka/test_real_acl_sync.py."""

from __future__ import annotations

import logging

import pytest

from mirror.broker import EmbeddedBroker
from mirror.engine import acl_sync
from mirror.engine.acl_sync import sync_topic_acls, target_bindings
from mirror.kafka import KafkaClient
from mirror.kafka.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType, \
    describe_topic_acls

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALL, READ, WRITE, DESCRIBE = AclOperation.ALL, AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
TOPICS = {"test_topic": "source.test_topic"}


def acl(operation: AclOperation, permission: AclPermissionType, name: str = "test_topic", *,
        pattern: PatternType = PatternType.LITERAL, resource: ResourceType = ResourceType.TOPIC,
        principal: str = "kafka", host: str = "") -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, operation, permission)


RULES = [
    # MirrorSourceConnectorTest.testAclFiltering: ALLOW WRITE is not replicated, ALLOW ALL is;
    # testAclTransformation: ALLOW ALL becomes ALLOW READ on the renamed topic, DENY ALL stays
    ("allow-write-is-not-replicated", acl(WRITE, ALLOW), []),
    ("allow-all-becomes-allow-read", acl(ALL, ALLOW), [acl(READ, ALLOW, "source.test_topic")]),
    ("deny-all-is-unchanged", acl(ALL, DENY), [acl(ALL, DENY, "source.test_topic")]),
    # shouldReplicateAcl drops ALLOW WRITE only
    ("deny-write-is-replicated", acl(WRITE, DENY), [acl(WRITE, DENY, "source.test_topic")]),
    ("allow-read-is-replicated", acl(READ, ALLOW), [acl(READ, ALLOW, "source.test_topic")]),
    ("allow-describe-is-replicated", acl(DESCRIBE, ALLOW), [acl(DESCRIBE, ALLOW, "source.test_topic")]),
    # syncTopicAcls' filters: TOPIC resources, LITERAL patterns, mirrored topics
    ("prefixed-pattern-is-not-replicated", acl(READ, ALLOW, "test_", pattern=PatternType.PREFIXED), []),
    ("group-resource-is-not-replicated", acl(READ, ALLOW, resource=ResourceType.GROUP), []),
    ("unmirrored-topic-is-not-replicated", acl(READ, ALLOW, "other_topic"), []),
    ("wildcard-names-no-mirrored-topic", acl(READ, ALLOW, "*"), []),
]


@pytest.mark.parametrize("source, expected", [case[1:] for case in RULES], ids=[case[0] for case in RULES])
def test_mm2_rules(source, expected):
    assert target_bindings([source], TOPICS) == expected


def test_principal_and_host_are_kept_and_each_target_binding_comes_once_in_source_order():
    source = [acl(ALL, ALLOW, principal="User:alice", host="10.0.0.7"), acl(WRITE, DENY),
              acl(READ, ALLOW, principal="User:alice", host="10.0.0.7")]
    assert target_bindings(source, TOPICS) == [acl(READ, ALLOW, "source.test_topic", principal="User:alice",
                                                   host="10.0.0.7"),
                                               acl(WRITE, DENY, "source.test_topic")]


def test_without_an_authorizer_nothing_is_synced_and_it_is_said_once(tmp_path, caplog, monkeypatch):
    """The embedded broker has no authorizer and answers DescribeAcls as Kafka does then
    (SECURITY_DISABLED): no error, no exception, one INFO line however many syncs."""
    monkeypatch.setattr(acl_sync, "_told_no_authorizer", set())  # as in a new process: ports get reused
    caplog.set_level(logging.DEBUG, logger="mirror.engine.acl_sync")
    with EmbeddedBroker(tmp_path / "src") as source, EmbeddedBroker(tmp_path / "dst") as destination, \
            KafkaClient(source.bootstrap) as source_client, KafkaClient(destination.bootstrap) as destination_client:
        assert describe_topic_acls(source_client) is None
        for _ in range(3):
            assert sync_topic_acls(source_client, destination_client, {"orders": "orders"}) == []
    said = [r for r in caplog.records if r.name == "mirror.engine.acl_sync" and r.levelno >= logging.INFO]
    assert [r.getMessage() for r in said] == [
        f"no ACL authorizer on the source cluster {source.bootstrap}, so no topic ACLs are synced "
        f"(turn topic ACL sync off to stop asking)"]
