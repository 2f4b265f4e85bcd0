"""Real Apache Kafka for the tests: clusters from :mod:`mirror.realkafka`, started once per
session where tests can share them (each test uses topics and groups of its own). A pytest
plugin (``tests/conftest.py`` loads it), so that any test module can run a scenario on real
Kafka as well as on the embedded broker; ``tests/realkafka/`` holds the tests that exist only
for real Kafka.

On a machine without Java or Maven (and no cached jars) these tests are skipped with one line
saying why, except under ``CI=true``, where a missing toolchain is a failure: CI must never
pass by skipping the reference cluster.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import pytest
from cryptography.hazmat.primitives import serialization

from mirror.realkafka import KAFKA_3, KAFKA_4, Distribution, KafkaCluster, TlsFiles, ToolchainError, toolchain_problem
from secure_brokers import Pki

if TYPE_CHECKING:
    from mirror.broker import EmbeddedBroker


def _unusable(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"real Kafka is required under CI=true: {reason}", pytrace=False)
    pytest.skip(f"real Kafka tests skipped: {reason}")


@pytest.fixture(scope="session")
def kafka_jars() -> Callable[[Distribution], Path]:
    """Resolves a distribution (Maven on the first run, the cache later), or skips/fails once."""
    problems: dict[Distribution, str] = {}

    def resolve(distribution: Distribution) -> Path:
        if distribution not in problems:
            problem = toolchain_problem(distribution)
            if problem is None:
                try:
                    distribution.resolve()
                except ToolchainError as exc:
                    problem = str(exc)
            problems[distribution] = problem or ""
        if problems[distribution]:
            _unusable(problems[distribution])
        return distribution.cached()

    return resolve


# Clusters by how long they live. A JVM left idle keeps a share of the machine's two cores
# and ~400 MB busy until the end of the session, so each is stopped once no test can reach it:
# started in a test's body, after that test; started by a module's fixture, after the module;
# the two shared ones (kafka_source, kafka_destination), at the end of the session.
_SHARED: list[KafkaCluster] = []
_THIS_MODULE: list[KafkaCluster] = []
_THIS_TEST: list[KafkaCluster] = []
_STOPPING: list[KafkaCluster] = []
_in_test_body = False


def _terminate(clusters: list[KafkaCluster]) -> None:
    """SIGTERM every node of ``clusters`` (a controlled shutdown) without waiting for it: the
    next test need not wait for these JVMs to exit; :func:`_reap` waits for them later."""
    while clusters:
        cluster = clusters.pop()
        for node in cluster.members:
            if node.running:
                node.process.terminate()
        _STOPPING.append(cluster)


def _reap() -> None:
    while _STOPPING:
        _STOPPING.pop().stop(timeout_s=10)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    global _in_test_body
    _in_test_body = True
    try:
        return (yield)
    finally:
        _in_test_body = False
        _terminate(_THIS_TEST)


@pytest.fixture(scope="module", autouse=True)
def _kafka_stopped_after_each_module() -> Iterator[None]:
    """Stops the clusters the module's fixtures started (autouse: set up before the module's
    other fixtures, so torn down after them)."""
    yield
    _terminate(_THIS_MODULE)
    _reap()


@pytest.fixture(scope="session")
def start_kafka(tmp_path_factory, kafka_jars) -> Iterator[Callable[..., KafkaCluster]]:
    """``start_kafka(nodes=1, distribution=KAFKA_4, **options)``: a started :class:`KafkaCluster`,
    stopped after the test when a test started it, after the module when a fixture did (or
    earlier by the test)."""
    numbers = itertools.count()

    def start(nodes: int = 1, distribution: Distribution = KAFKA_4, **options) -> KafkaCluster:
        kafka_jars(distribution)
        directory = tmp_path_factory.mktemp(f"kafka-{distribution.version}-{next(numbers)}")
        cluster = KafkaCluster(directory, nodes=nodes, distribution=distribution, **options)
        (_THIS_TEST if _in_test_body else _THIS_MODULE).append(cluster)
        return cluster.start()

    yield start
    for clusters in (_SHARED, _THIS_MODULE, _THIS_TEST):
        _terminate(clusters)
    _reap()


def _retire(cluster: KafkaCluster) -> None:
    """Stops ``cluster`` now, without waiting for its JVMs to exit (that waits for the module's end)."""
    for clusters in (_THIS_MODULE, _THIS_TEST):
        if cluster in clusters:
            clusters.remove(cluster)
    _terminate([cluster])


def _shared(cluster: KafkaCluster) -> KafkaCluster:
    for clusters in (_THIS_MODULE, _THIS_TEST):
        if cluster in clusters:
            clusters.remove(cluster)
    _SHARED.append(cluster)
    return cluster


@pytest.fixture(scope="session")
def kafka_source(start_kafka) -> KafkaCluster:
    """A one-node Kafka 4.x cluster shared by the session's tests as a source."""
    return _shared(start_kafka())


@pytest.fixture(scope="session")
def kafka_destination(start_kafka) -> KafkaCluster:
    """A one-node Kafka 4.x cluster shared by the session's tests as a destination."""
    return _shared(start_kafka())


@pytest.fixture(params=[KAFKA_4, KAFKA_3], ids=lambda d: f"kafka-{d.version}")
def kafka_version(request) -> Distribution:
    """Both pinned Kafka lines, for the tests that run on each."""
    return request.param


def kafka_tls(pki: Pki) -> TlsFiles:
    """The PEM files Kafka's brokers read for ``pki``: Kafka takes only PKCS#8 private keys
    ("BEGIN PRIVATE KEY"), and trustme writes EC keys in SEC1 form, so the key is converted."""
    pem = pki.server.read_bytes()
    key_end = pem.index(b"-----END EC PRIVATE KEY-----") + len(b"-----END EC PRIVATE KEY-----\n")
    key = serialization.load_pem_private_key(pem[:key_end], password=None)
    pkcs8 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
    server = pki.server.with_name("kafka-server.pem")
    server.write_bytes(pkcs8 + pem[key_end:])
    return TlsFiles(ca=pki.ca, server=server)


# --- one scenario, several kinds of cluster -----------------------------------------------------

PAIRS = {
    "embedded": ("embedded", "embedded"),
    "kafka": ("kafka", "kafka"),
    "embedded-to-kafka": ("embedded", "kafka"),
    "kafka-to-embedded": ("kafka", "embedded"),
    "kafka-authorizer": ("kafka-authorizer", "kafka-authorizer"),
}
"""Source and destination kinds by name: kmirror's embedded broker, or real Kafka 4.x (with
StandardAuthorizer, every plaintext client a super user, for ``kafka-authorizer``)."""


def pairs(*names: str) -> list:
    """``@pytest.mark.parametrize("clusters", pairs("embedded", "kafka"), indirect=True)``: the
    named pairs, those with real Kafka marked ``kafka``."""
    return [pytest.param(name, id=name, marks=[pytest.mark.kafka] if any(kind.startswith("kafka") for kind in PAIRS[name])
                         else []) for name in names]


@dataclass
class ClusterPair:
    """A fresh source and destination for one test, each with a ``bootstrap``."""

    source: EmbeddedBroker | KafkaCluster
    destination: EmbeddedBroker | KafkaCluster
    kinds: tuple[str, str]


@pytest.fixture
def clusters(request, tmp_path, start_kafka) -> Iterator[ClusterPair]:
    """New clusters of the kinds ``request.param`` names (see :data:`PAIRS`), stopped after the test."""
    from mirror.broker import EmbeddedBroker

    kinds = PAIRS[request.param]
    started: list = []

    def start(kind: str, name: str):
        cluster = (EmbeddedBroker(tmp_path / name).start() if kind == "embedded"
                   else start_kafka(authorizer=kind == "kafka-authorizer"))
        started.append(cluster)
        return cluster

    try:
        yield ClusterPair(start(kinds[0], "src"), start(kinds[1], "dst"), kinds)
    finally:
        for cluster in started:
            if isinstance(cluster, KafkaCluster):
                _retire(cluster)
            else:
                cluster.stop()


def produce_raw(bootstrap: str, topic: str, partition: int, records: bytes, *, transactional_id: str | None = None,
                timeout_s: float = 30.0) -> tuple[int, int | None]:
    """(error code, base offset) of one hand-made Produce request (v9, kafka-python's
    encoding), acks=all: what a broker says of ``records`` exactly as given."""
    import time

    from kafka.protocol.producer import ProduceRequest

    from mirror.kafka import KafkaConnection

    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=int(timeout_s * 1000), topic_data=[
        data(name=topic, partition_data=[data.PartitionProduceData(index=partition, records=records)])])
    deadline = time.monotonic() + timeout_s
    while True:
        with KafkaConnection(bootstrap, timeout_s=timeout_s) as wire:
            (topic_response,) = wire.call(request, version=9).responses
        (answer,) = topic_response.partition_responses
        # A topic just created has no leader yet on a busy Kafka broker (NOT_LEADER_OR_FOLLOWER,
        # or UNKNOWN_TOPIC_OR_PARTITION): nothing was appended, so asking again is the same request.
        if answer.error_code not in (3, 6) or time.monotonic() > deadline:
            return answer.error_code, answer.base_offset if answer.error_code == 0 else None
        time.sleep(0.1)


def partition_leader(bootstrap: str, topic: str, partition: int, *, timeout_s: float = 60.0) -> int:
    """The node leading ``topic``'s ``partition``, once the metadata names one: right after
    CreateTopics, Kafka's metadata may not list the topic's partitions yet, or give no leader."""
    import time

    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while True:
        found = admin.list_topics(topic, timeout=30).topics.get(topic)
        leader = found.partitions[partition].leader if found and partition in found.partitions else -1
        if leader >= 0:
            return leader
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}/{partition} has no leader after {timeout_s:g} s")
        time.sleep(0.2)
