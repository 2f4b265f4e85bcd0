"""A long-running mirror keeps the destination shaped like the source as the source changes
(issue 37), as MirrorMaker 2 does: partitions added at the source are added at the
destination before their records are copied, each record on its source partition; a topic
config changed at the source, and (where the clusters enforce ACLs) a READ ACL given at the
source, reach the destination within one sync interval.

On the embedded broker and on real Kafka 4.x with StandardAuthorizer. The source is changed
with librdkafka's admin client, the destination is checked with it and read back with
librdkafka's read_committed consumer: nothing here is judged by kmirror's code.
"""

from __future__ import annotations

import threading

import pytest
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, ResourcePatternType,
                                   ResourceType)
from librdkafka_reader import read_values
from live_source import Writer, wait_until
from real_kafka import pairs

from mirror.config import load_config
from mirror.kafka import KafkaClient, NewTopic

pytestmark = pytest.mark.slow

SYNC_INTERVAL_S = 3.0


def _partitions(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def _config_value(admin: AdminClient, topic: str, name: str) -> str | None:
    (future,) = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
    return future.result(10)[name].value


def _read_acls(admin: AdminClient, topic: str) -> set[tuple[str, str, str]]:
    wanted = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)
    return {(b.principal, b.operation.name, b.permission_type.name) for b in admin.describe_acls(wanted).result(10)}


@pytest.mark.parametrize("clusters", pairs("embedded", "kafka-authorizer"), indirect=True)
def test_partitions_configs_and_acls_added_at_the_source_reach_the_destination_while_it_runs(tmp_path, clusters):
    from mirror.spark.job import run_mirror

    src, dst = clusters.source, clusters.destination
    acls = clusters.kinds[0] == "kafka-authorizer"
    with KafkaClient(src.bootstrap) as client:
        client.create_topics([NewTopic("growing", 4, configs={"retention.ms": "-1"})])
    config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                "topics": "growing", "checkpoint": str(tmp_path / "ck"),
                                "sync_topic_configs_interval_s": SYNC_INTERVAL_S})
    source_admin = AdminClient({"bootstrap.servers": src.bootstrap})
    destination_admin = AdminClient({"bootstrap.servers": dst.bootstrap})
    stop = threading.Event()
    reports = []
    job = threading.Thread(target=run_mirror, args=(config,), kwargs={"stop": stop, "on_report": reports.append})
    job.start()
    try:
        with Writer(src.bootstrap, "growing", 4) as before:
            wait_until(lambda: reports or not job.is_alive(), "the first micro-batch", 120, 0.2)
        # Created with the source's configs (before issue 37, retention was the destination's default).
        assert _config_value(destination_admin, "growing", "retention.ms") == "-1"

        source_admin.create_partitions([NewPartitions("growing", 6)])["growing"].result(10)
        change = ConfigResource(ConfigResource.Type.TOPIC, "growing", incremental_configs=[
            ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])
        source_admin.incremental_alter_configs([change])[change].result(10)
        if acls:
            given = [AclBinding(ResourceType.TOPIC, "growing", ResourcePatternType.LITERAL, "User:alice", "*",
                                operation, AclPermissionType.ALLOW)
                     for operation in (AclOperation.READ, AclOperation.WRITE)]
            for future in source_admin.create_acls(given).values():
                future.result(10)
        with Writer(src.bootstrap, "growing", 6) as after:
            wait_until(lambda: _partitions(destination_admin, "growing") == 6, "6 destination partitions",
                       60, 0.2)
        wait_until(lambda: _config_value(destination_admin, "growing", "retention.ms") == "86400000",
                   "retention.ms at the destination", 4 * SYNC_INTERVAL_S + 30, 0.5)
        if acls:  # READ copied, WRITE not: only the mirror writes to its topics (as MirrorMaker 2)
            wait_until(lambda: _read_acls(destination_admin, "growing") == {("User:alice", "READ", "ALLOW")},
                       "alice's READ ACL at the destination", 4 * SYNC_INTERVAL_S + 30, 0.5)
        written = {p: before.written.get(p, []) + after.written[p] for p in range(6)}
        wait_until(lambda: sum(map(len, read_values(dst.bootstrap, "growing", 6).values()))
                   >= sum(map(len, written.values())), "every record copied", 120, 1.0)
        copied = read_values(dst.bootstrap, "growing", 6)
    finally:
        stop.set()
        job.join(120)
    for p in range(6):
        assert copied[p] == written[p], f"growing/{p}: not the source partition's records, in order"
    assert copied[4] and copied[5]  # the new partitions had records, and kept them
