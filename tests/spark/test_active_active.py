"""Two jobs, A -> B and B -> A, both over ``.*``, running at once under load in both directions
(issue 37): no topic is mirrored back to where its records came from, so no record is copied
twice and no topic name nests, under both replication policies.

- ``prefix``: A's ``orders`` is ``a.orders`` on B; B -> A must leave ``a.orders`` out by its name.
- ``identity``: the names do not tell; B -> A must leave A's copy out by its provenance
  (``kmirror-provenance``), or A's own topic would get its records a second time.

On the embedded broker (both policies) and real Kafka 4.x (identity, the case only
kmirror's provenance catches). The load lasts tests/support/sizes.py's ``active_active``: a
few seconds at CI size (the provenance check does not depend on how long), issue 37's 60 s
under ``./dev test --acceptance``. Verdicts from librdkafka's read_committed consumer and its
admin client's topic list.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from confluent_kafka.admin import AdminClient
from librdkafka_reader import read_values
from live_source import Writer, wait_until
from sizes import size

from mirror.kafka import KafkaClient, NewTopic

pytestmark = pytest.mark.slow

PARTITIONS = 2
LOAD_S = size("active_active").load_s


def _job(source: str, destination: str, name: str, policy: str, source_alias: str, destination_alias: str,
         tmp_path) -> subprocess.Popen:
    command = [sys.executable, "-m", "mirror.cli", "run", "--source", source, "--destination", destination,
               "--topics", ".*", "--replication-policy", policy, "--source-alias", source_alias,
               "--destination-alias", destination_alias, "--checkpoint", str(tmp_path / f"ck-{name}"),
               "--name", name, "--delivery", "at-least-once"]
    log = open(tmp_path / f"{name}.log", "w")
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _topics(bootstrap: str) -> set[str]:
    """Every topic but Kafka's and the two jobs' own (a mirrored copy of one, prefixed, shows)."""
    listed = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    return {t for t in listed if not t.startswith(("__", "kmirror-offsets.", "kmirror-offset-syncs.", "kmirror-flow."))
            and t != "kmirror-provenance"}


@pytest.mark.parametrize("clusters, policy, a_topic, b_topic, a_copy, b_copy", [
    pytest.param("embedded", "identity", "a-orders", "b-orders", "a-orders", "b-orders", id="embedded-identity"),
    pytest.param("embedded", "prefix", "orders", "orders", "a.orders", "b.orders", id="embedded-prefix"),
    pytest.param("kafka", "identity", "a-orders", "b-orders", "a-orders", "b-orders", id="kafka-identity",
                 marks=pytest.mark.kafka),
], indirect=["clusters"])
def test_two_jobs_mirroring_each_other_copy_each_record_once_per_cluster(tmp_path, clusters, policy, a_topic,
                                                                         b_topic, a_copy, b_copy):
    a, b = clusters.source, clusters.destination
    for broker, topic in ((a, a_topic), (b, b_topic)):
        with KafkaClient(broker.bootstrap) as client:
            client.create_topics([NewTopic(topic, PARTITIONS)])
    jobs = [_job(a.bootstrap, b.bootstrap, "a-to-b", policy, "a", "b", tmp_path),
            _job(b.bootstrap, a.bootstrap, "b-to-a", policy, "b", "a", tmp_path)]
    try:
        # The load starts once both jobs copy (their copiers started), so that all of it runs
        # against both at once.
        wait_until(lambda: all("executors ready" in (tmp_path / f"{name}.log").read_text() or job.poll() is not None
                               for name, job in zip(("a-to-b", "b-to-a"), jobs)), "both jobs to start", 240, 0.5)
        with Writer(a.bootstrap, a_topic, PARTITIONS, 0.05) as on_a, \
                Writer(b.bootstrap, b_topic, PARTITIONS, 0.05) as on_b:
            deadline = time.monotonic() + LOAD_S
            while time.monotonic() < deadline:
                assert all(job.poll() is None for job in jobs), (tmp_path / "a-to-b.log").read_text()[-3000:]
                time.sleep(1)
        for bootstrap, copy, writer in ((b.bootstrap, a_copy, on_a), (a.bootstrap, b_copy, on_b)):
            wait_until(lambda: copy in _topics(bootstrap) and all(
                len(values) >= len(writer.written[p])
                for p, values in read_values(bootstrap, copy, PARTITIONS).items()), f"{copy} copied", 180, 1.0)
        time.sleep(5)  # time for a wrongly mirrored-back copy to show
        on_a_topics, on_b_topics = _topics(a.bootstrap), _topics(b.bootstrap)
        read = {(cluster, topic): read_values(bootstrap, topic, PARTITIONS)
                for cluster, bootstrap, topics in (("a", a.bootstrap, on_a_topics), ("b", b.bootstrap, on_b_topics))
                for topic in topics}
    finally:
        for job in jobs:
            job.terminate()
        for job in jobs:
            job.wait(120)
    assert on_a_topics == {a_topic, b_copy} and on_b_topics == {b_topic, a_copy}, "a topic was mirrored back"
    for p in range(PARTITIONS):
        # Each cluster holds each origin's records once: the original, and one copy in order.
        assert read["a", a_topic][p] == on_a.written[p] and read["b", a_copy][p] == on_a.written[p]
        assert read["b", b_topic][p] == on_b.written[p] and read["a", b_copy][p] == on_b.written[p]
