"""Issue 37: topic ACLs synced between two real Kafka 4.x clusters that enforce ACLs
(StandardAuthorizer), by MirrorMaker 2's rules; ACLs made and every verdict read by
librdkafka's AdminClient.

At the source, on the mirrored topic: alice may READ, bob WRITE, carol ALL, and mallory is
denied ALL; dave may READ every topic whose name starts with it (PREFIXED), and erin may READ
a topic that is not mirrored. After one sync the destination holds, on the destination
topic and nothing else: alice READ, carol READ (ALLOW ALL downgraded), mallory DENY ALL. A
second sync creates nothing. A cluster without an authorizer, on either side, makes a sync
do nothing, said once at INFO.
"""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from mirror.engine import acl_sync
from mirror.engine.acl_sync import sync_topic_acls
from mirror.kafka import KafkaClient
from mirror.realkafka import KafkaCluster

pytestmark = pytest.mark.slow

TIMEOUT_S = 30
Acl = tuple[str, str, str, str, str, str, str]
"""(resource type, name, pattern type, principal, host, operation, permission), by name."""


@pytest.fixture(scope="module")
def secured(start_kafka) -> tuple[KafkaCluster, KafkaCluster]:
    return start_kafka(authorizer=True), start_kafka(authorizer=True)


def _binding(name: str, principal: str, operation: AclOperation,
             permission: AclPermissionType = AclPermissionType.ALLOW,
             pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, principal, "*", operation, permission)


def _create(cluster: KafkaCluster, bindings: list[AclBinding]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # kept: its futures die with it
    for future in admin.create_acls(bindings).values():
        future.result(TIMEOUT_S)


def _acls(cluster: KafkaCluster, *, at_least: int = 0) -> set[Acl]:
    """Every ACL the cluster describes, once it describes ``at_least`` of them (a broker
    applies ACLs from the metadata log, a moment after CreateAcls answers), or after the
    timeout, whatever it has then."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        found = {(b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name,
                  b.permission_type.name) for b in admin.describe_acls(every).result(TIMEOUT_S)}
        if len(found) >= at_least or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_topic_acls_follow_mm2_rules_and_a_steady_mirror_creates_none(secured):
    source, destination = secured
    read, write, every = AclOperation.READ, AclOperation.WRITE, AclOperation.ALL
    made = [_binding("orders", "User:alice", read), _binding("orders", "User:bob", write),
            _binding("orders", "User:carol", every), _binding("orders", "User:mallory", every, AclPermissionType.DENY),
            _binding("ord", "User:dave", read, pattern=ResourcePatternType.PREFIXED),
            _binding("audit", "User:erin", read)]
    _create(source, made)
    assert len({acl for acl in _acls(source, at_least=len(made)) if acl[1] in ("orders", "ord", "audit")}) == len(made)

    expected = {("TOPIC", "src.orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
                ("TOPIC", "src.orders", "LITERAL", "User:carol", "*", "READ", "ALLOW"),
                ("TOPIC", "src.orders", "LITERAL", "User:mallory", "*", "ALL", "DENY")}
    with KafkaClient(source.bootstrap) as source_client, KafkaClient(destination.bootstrap) as destination_client:
        created = sync_topic_acls(source_client, destination_client, {"orders": "src.orders"})
        assert {(b.resource_type.name, b.name, b.pattern_type.name, b.principal, b.host, b.operation.name,
                 b.permission.name) for b in created} == expected
        assert _acls(destination, at_least=len(expected)) == expected
        assert sync_topic_acls(source_client, destination_client, {"orders": "src.orders"}) == []
    assert _acls(destination) == expected


def test_a_cluster_without_an_authorizer_on_either_side_syncs_nothing_said_once(secured, kafka_destination, caplog,
                                                                                monkeypatch):
    """``kafka_destination`` is a real Kafka cluster with no authorizer: SECURITY_DISABLED, as
    the destination and then as the source."""
    monkeypatch.setattr(acl_sync, "_told_no_authorizer", set())  # as in a new process
    source, destination = secured
    _create(source, [_binding("payments", "User:frank", AclOperation.READ)])
    assert ("TOPIC", "payments", "LITERAL", "User:frank", "*", "READ", "ALLOW") in _acls(source, at_least=1)
    plain = kafka_destination
    caplog.set_level(logging.DEBUG, logger="mirror.engine.acl_sync")
    with KafkaClient(source.bootstrap) as source_client, KafkaClient(destination.bootstrap) as destination_client, \
            KafkaClient(plain.bootstrap) as plain_client:
        for _ in range(2):
            assert sync_topic_acls(source_client, plain_client, {"payments": "payments"}) == []
        for _ in range(2):
            assert sync_topic_acls(plain_client, destination_client, {"payments": "payments"}) == []
    said = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "mirror.engine.acl_sync"]
    skipping = "still has no ACL authorizer; skipping topic ACL sync"
    assert said == [
        (logging.INFO, f"no ACL authorizer on the destination cluster {plain.bootstrap}, so no topic ACLs are synced "
                       f"(turn topic ACL sync off to stop asking)"),
        (logging.DEBUG, f"destination cluster {plain.bootstrap} {skipping}"),
        (logging.DEBUG, f"source cluster {plain.bootstrap} {skipping}"),
        (logging.DEBUG, f"source cluster {plain.bootstrap} {skipping}"),
    ]
    assert ("TOPIC", "payments", "LITERAL", "User:frank", "*", "READ", "ALLOW") not in _acls(destination)
