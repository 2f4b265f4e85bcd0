"""The real-Kafka launcher itself: what it starts is what it claims, checked with librdkafka.

One node and three nodes, PLAINTEXT, SSL with client certificates, SASL_SSL with SCRAM-SHA-512
credentials created by ``kafka-storage format --add-scram``, a node killed and started again.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from mirror.realkafka import KAFKA_4, toolchain_problem
from mirror.realkafka.distribution import cache_dir
from secure_brokers import Pki

from real_kafka import kafka_tls

pytestmark = pytest.mark.slow

USER, PASSWORD = "mirror", "scram-pw-9d2e"


def _round_trip(bootstrap: str, topic: str, conf: dict | None = None, count: int = 50) -> list[bytes]:
    conf = conf or {}
    admin = AdminClient({"bootstrap.servers": bootstrap, **conf})
    for future in admin.create_topics([NewTopic(topic, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **conf})
    for i in range(count):
        producer.produce(topic, b"v%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.partition.eof": True, **conf})
    consumer.assign([CTP(topic, 0, 0)])
    values = []
    try:
        while True:
            message = consumer.poll(30)
            assert message is not None
            if message.error():
                break
            values.append(message.value())
    finally:
        consumer.close()
    return values


def test_one_node_serves_librdkafka(kafka_source):
    assert _round_trip(kafka_source.bootstrap, "launcher.plain") == [b"v%d" % i for i in range(50)]
    assert kafka_source.node(1).running


def test_ssl_requires_a_client_certificate_and_sasl_ssl_takes_the_scram_user(start_kafka, tmp_path):
    pki = Pki.create(tmp_path)
    cluster = start_kafka(tls=kafka_tls(pki), scram_users={USER: PASSWORD})
    mtls = {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca), "ssl.certificate.location": str(pki.client),
            "ssl.key.location": str(pki.client)}
    assert len(_round_trip(cluster.bootstrap_for("SSL"), "launcher.mtls", mtls)) == 50
    scram = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca), "sasl.mechanism": "SCRAM-SHA-512",
             "sasl.username": USER, "sasl.password": PASSWORD}
    assert len(_round_trip(cluster.bootstrap_for("SASL_SSL"), "launcher.scram", scram)) == 50
    for wrong in ({**mtls, "ssl.certificate.location": None, "ssl.key.location": None},
                  {**scram, "sasl.password": "wrong"}):
        wrong = {k: v for k, v in wrong.items() if v is not None}
        listener = "SSL" if wrong["security.protocol"] == "SSL" else "SASL_SSL"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_for(listener), **wrong})
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=5)


def test_three_nodes_replicate_survive_a_killed_node_and_take_it_back(start_kafka):
    cluster = start_kafka(nodes=3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    assert len(_round_trip(cluster.bootstrap, "launcher.replicated")) == 50
    topic = admin.list_topics("launcher.replicated", timeout=10).topics["launcher.replicated"]
    assert sorted(topic.partitions[0].replicas) == [1, 2, 3]
    (configs,) = admin.describe_configs([ConfigResource("topic", "launcher.replicated")]).values()
    assert configs.result(10)["min.insync.replicas"].value == "2"
    leader = topic.partitions[0].leader
    cluster.kill(leader)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    producer.produce("launcher.replicated", b"after the kill")
    assert producer.flush(60) == 0  # two of three replicas are in sync: min.insync.replicas holds
    cluster.start_node(leader)
    assert cluster.node(leader).running


def test_no_java_is_named_as_the_reason(monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "no Java" in toolchain_problem(KAFKA_4)


def test_no_maven_and_no_cache_is_named_as_the_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("KMIRROR_CACHE_DIR", str(tmp_path / "empty-cache"))
    java = tmp_path / "bin"
    java.mkdir()
    (java / "java").symlink_to("/bin/true")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(java))
    assert cache_dir() == tmp_path / "empty-cache"
    assert "no Maven" in toolchain_problem(KAFKA_4)
