"""Issue 34: the mirror between secured real Kafka 4.x listeners, every verdict read by librdkafka.

Two TLS clusters, each with the launcher's ``SSL`` listener (client certificates required)
and ``SASL_SSL`` listener (SCRAM-SHA-512, users created by ``kafka-storage format
--add-scram``), started once for the module; the source's and the destination's SCRAM
passwords differ, so credentials swapped between the clusters would fail. A mirror over
SASL_SSL and one over mTLS copy every record in order. Refused credentials (a wrong
password; no client certificate; one from a CA the brokers do not trust) end ``kmirror run``
with exit code 2 and one ERROR line, and fail at once: the runs below have no ``--once`` and
no ``--max-outage``, so a refusal mistaken for an outage would be waited out forever (the
subprocess timeout would then fail the test). A long-running mirror over SASL_SSL (issue 60:
resident copiers, whose leases carry the TLS files) copies a live stream once and stops on
SIGTERM.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from librdkafka_reader import read_values
from live_source import ProducerWriter, copy_live_then_sigterm

from mirror.config import load_config
from mirror.realkafka import KafkaCluster
from secure_brokers import Pki

from real_kafka import kafka_tls

pytestmark = pytest.mark.slow

USER = "kmirror"
SOURCE_PASSWORD = "src-scram-5c1e8a"
DESTINATION_PASSWORD = "dst-scram-0b7f3d"
PARTITIONS = 3
RECORDS = 600


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki.create(tmp_path_factory.mktemp("secure-mirror"))


@pytest.fixture(scope="module")
def clusters(start_kafka, pki) -> tuple[KafkaCluster, KafkaCluster]:
    """Source and destination, started side by side (each JVM mostly waits on its own start)."""
    tls = kafka_tls(pki)
    started: dict[str, KafkaCluster] = {}
    failures: list[BaseException] = []

    def start(name: str, password: str) -> None:
        try:
            started[name] = start_kafka(tls=tls, scram_users={USER: password})
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=start, args=args) for args in
               (("source", SOURCE_PASSWORD), ("destination", DESTINATION_PASSWORD))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return started["source"], started["destination"]


def _scram(pki: Pki, password: str) -> dict:
    return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca), "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": USER, "sasl.password": password}


def _mtls(pki: Pki) -> dict:
    return {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca), "ssl.certificate.location": str(pki.client),
            "ssl.key.location": str(pki.client)}


def _fill(bootstrap: str, topic: str, conf: dict) -> None:
    """Keyed records in zstd batches of a few dozen, from librdkafka's idempotent producer."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **conf})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "zstd",
                         "linger.ms": 5, "batch.num.messages": 40, **conf})
    for i in range(RECORDS):
        producer.produce(topic, key=b"k%d" % (i % 37), value=b"%s-%d" % (topic.encode(), i), partition=i % PARTITIONS)
        producer.poll(0)
    assert producer.flush(30) == 0


def _cluster_settings(prefix: str, cluster: KafkaCluster, pki: Pki, how: str, password: str) -> dict:
    if how == "scram":
        return {f"{prefix}.bootstrap": cluster.bootstrap_for("SASL_SSL"), f"{prefix}.security_protocol": "SASL_SSL",
                f"{prefix}.tls.ca_file": str(pki.ca), f"{prefix}.sasl.mechanism": "SCRAM-SHA-512",
                f"{prefix}.sasl.username": USER, f"{prefix}.sasl.password": password}
    return {f"{prefix}.bootstrap": cluster.bootstrap_for("SSL"), f"{prefix}.security_protocol": "SSL",
            f"{prefix}.tls.ca_file": str(pki.ca), f"{prefix}.tls.cert_file": str(pki.client)}


@pytest.mark.parametrize("how", ["scram", "mtls"])
def test_a_mirror_between_secured_kafka_listeners_copies_every_record_in_order(clusters, pki, tmp_path, caplog, how):
    from mirror.spark.job import run_mirror

    caplog.set_level(logging.DEBUG)
    src, dst = clusters
    topic = f"secure.{how}"
    source_conf = _scram(pki, SOURCE_PASSWORD) if how == "scram" else _mtls(pki)
    destination_conf = _scram(pki, DESTINATION_PASSWORD) if how == "scram" else _mtls(pki)
    listener = "SASL_SSL" if how == "scram" else "SSL"
    _fill(src.bootstrap_for(listener), topic, source_conf)
    config = load_config(None, {**_cluster_settings("source", src, pki, how, SOURCE_PASSWORD),
                                **_cluster_settings("destination", dst, pki, how, DESTINATION_PASSWORD),
                                "topics": topic, "once": True, "checkpoint": str(tmp_path / "ck")})
    totals = run_mirror(config)
    expected = read_values(src.bootstrap_for(listener), topic, PARTITIONS, **source_conf)
    copied = read_values(dst.bootstrap_for(listener), topic, PARTITIONS, **destination_conf)
    assert sum(map(len, expected.values())) == RECORDS
    assert copied == expected  # every record, each partition in order, read_committed
    assert totals.counters.total_records == RECORDS
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert SOURCE_PASSWORD not in logged and DESTINATION_PASSWORD not in logged


def _refused(tmp_path, *flags: str, topics: str = "secure\\..*",
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``kmirror run`` without ``--once`` or ``--max-outage``: only a permanent error ends it."""
    return subprocess.run([sys.executable, "-m", "mirror.cli", "run", "--topics", topics,
                           "--checkpoint", str(tmp_path / "ck"), *flags],
                          capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


def _one_clear_error(done: subprocess.CompletedProcess, *expected: str) -> str:
    assert done.returncode == 2, done.stderr[-5000:]
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, done.stderr[-5000:]
    assert "Traceback" not in done.stderr and "\tat " not in done.stderr, done.stderr[-5000:]
    assert "outage" not in done.stderr and "unreachable" not in done.stderr, done.stderr[-5000:]
    # Refused while the clusters are contacted, before the job logs what it mirrors and starts
    # Spark.
    assert "mirroring" not in done.stderr, done.stderr[-5000:]
    for text in expected:
        assert text in errors[0], errors[0]
    return errors[0]


def test_a_wrong_scram_password_exits_2_with_one_error_line(clusters, pki, tmp_path):
    src, dst = clusters
    done = _refused(tmp_path, "--source", src.bootstrap_for("SASL_SSL"), "--source-security-protocol", "SASL_SSL",
                    "--source-tls-ca-file", str(pki.ca), "--source-sasl-mechanism", "SCRAM-SHA-512",
                    "--source-sasl-username", USER, "--source-sasl-password-env", "KMIRROR_TEST_PASSWORD",
                    "--destination", dst.bootstrap, env={"KMIRROR_TEST_PASSWORD": DESTINATION_PASSWORD})
    line = _one_clear_error(done, "authentication failed", src.bootstrap_for("SASL_SSL"))
    assert DESTINATION_PASSWORD not in done.stderr + done.stdout
    assert "SCRAM-SHA-512" in line


def test_an_mtls_listener_refuses_a_client_without_a_certificate(clusters, pki, tmp_path):
    """At the destination, with no source topic selected yet: the destination used to be
    reached only from Spark then, after the JVM had started."""
    src, dst = clusters
    done = _refused(tmp_path, "--source", src.bootstrap, "--destination", dst.bootstrap_for("SSL"),
                    "--destination-security-protocol", "SSL", "--destination-tls-ca-file", str(pki.ca),
                    topics="created-later\\..*")
    _one_clear_error(done, "authentication failed", dst.bootstrap_for("SSL"))


def test_an_mtls_listener_refuses_a_certificate_from_a_ca_it_does_not_trust(clusters, pki, tmp_path):
    src, dst = clusters
    stranger = Pki.create(tmp_path, "stranger")  # its own CA: a client certificate Kafka cannot verify
    done = _refused(tmp_path, "--source", src.bootstrap_for("SSL"), "--source-security-protocol", "SSL",
                    "--source-tls-ca-file", str(pki.ca), "--source-tls-cert-file", str(stranger.client),
                    "--destination", dst.bootstrap)
    _one_clear_error(done, "authentication failed", src.bootstrap_for("SSL"))


def test_a_long_running_mirror_over_sasl_ssl_copies_a_live_stream_once_and_stops_on_sigterm(clusters, pki, tmp_path):
    """Issue 60's acceptance on real Kafka: ``kmirror run`` without ``--once`` (resident copiers,
    whose leases carry both clusters' CA files and SCRAM passwords) copies what librdkafka
    writes while it runs, each record once, and exits 0 on SIGTERM."""
    src, dst = clusters
    topic = "secure.live"
    source_conf, destination_conf = _scram(pki, SOURCE_PASSWORD), _scram(pki, DESTINATION_PASSWORD)
    admin = AdminClient({"bootstrap.servers": src.bootstrap_for("SASL_SSL"), **source_conf})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS)]).values():
        future.result(30)
    flags = []
    for side, cluster in (("source", src), ("destination", dst)):
        flags += [f"--{side}", cluster.bootstrap_for("SASL_SSL"), f"--{side}-security-protocol", "SASL_SSL",
                  f"--{side}-tls-ca-file", str(pki.ca), f"--{side}-sasl-mechanism", "SCRAM-SHA-512",
                  f"--{side}-sasl-username", USER, f"--{side}-sasl-password-env", f"KMIRROR_TEST_{side.upper()}_PW"]
    job = subprocess.Popen([sys.executable, "-m", "mirror.cli", "run", "--topics", topic, "--checkpoint",
                            str(tmp_path / "ck"), *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "KMIRROR_TEST_SOURCE_PW": SOURCE_PASSWORD,
                                "KMIRROR_TEST_DESTINATION_PW": DESTINATION_PASSWORD})
    writer = ProducerWriter(src.bootstrap_for("SASL_SSL"), topic, PARTITIONS, **source_conf)
    stderr = copy_live_then_sigterm(
        job, writer, lambda: read_values(dst.bootstrap_for("SASL_SSL"), topic, PARTITIONS, **destination_conf))
    copied = read_values(dst.bootstrap_for("SASL_SSL"), topic, PARTITIONS, **destination_conf)
    assert copied == writer.written  # every record, once, in order, read_committed
    assert SOURCE_PASSWORD not in stderr and DESTINATION_PASSWORD not in stderr
