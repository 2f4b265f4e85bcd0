"""Acceptance of issue 13 (TLS and SASL): ``kmirror run --once`` between two SASL_SSL
(SCRAM-SHA-512) embedded brokers copies exactly what librdkafka reads at the source, and no
password shows anywhere: not in the run's stdout or stderr at DEBUG (driver, planner,
executors, JVM), not in the brokers' log records, not in the checkpoint.

Acceptance of issue 60: the long-running job between the same clusters (resident copiers,
whose leases carry the TLS files and the passwords) copies a live stream once and exits 0 on
SIGTERM; a copier that cannot read a lease fails the job with its reason."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
from librdkafka_reader import read_values
from live_source import ProducerWriter, copy_live_then_sigterm, wait_until
from secure_brokers import USER, Pki, kmirror_security, librdkafka_conf

import kcodecs
from kcodecs import Record
from mirror.broker import EmbeddedBroker
from mirror.broker.security import MECHANISMS, ListenerSecurity, ListenerTls, SaslUser
from mirror.kafka import KafkaClient, NewTopic, TopicPartition

pytestmark = pytest.mark.slow

SOURCE_PASSWORD = "src-pw-91b3e0c7"
DESTINATION_PASSWORD = "dst-pw-5a7d22f4"
PARTITIONS, BATCHES, PER_BATCH = 3, 8, 25


def _listener(pki: Pki, password: str) -> ListenerSecurity:
    return ListenerSecurity(tls=ListenerTls(pki.server, pki.server), sasl_mechanisms=MECHANISMS,
                            users=(SaslUser(USER, password),))


def test_kmirror_run_mirrors_between_sasl_ssl_brokers_and_logs_no_secret(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    pki = Pki.create(tmp_path)
    with EmbeddedBroker(tmp_path / "src", security=_listener(pki, SOURCE_PASSWORD)) as src, \
            EmbeddedBroker(tmp_path / "dst", security=_listener(pki, DESTINATION_PASSWORD)) as dst:
        with KafkaClient(src.bootstrap, security=kmirror_security(pki, "SCRAM-SHA-512", password=SOURCE_PASSWORD)) as source:
            source.create_topics([NewTopic("orders", PARTITIONS)])
            for b in range(BATCHES):
                for p in range(PARTITIONS):
                    records = [Record(key=None, value=b"%d-%d-%d" % (p, b, i)) for i in range(PER_BATCH)]
                    source.produce([(TopicPartition("orders", p), kcodecs.build_batch(records, compression="zstd"))])
        # The source's password from the environment (a flag names the variable), the
        # destination's in the TOML file.
        config = tmp_path / "mirror.toml"
        config.write_text(f"""topics = "orders"
[destination]
bootstrap = "{dst.bootstrap}"
security_protocol = "SASL_SSL"
[destination.tls]
ca_file = "{pki.ca}"
[destination.sasl]
mechanism = "SCRAM-SHA-512"
username = "{USER}"
password = "{DESTINATION_PASSWORD}"
""")
        run = subprocess.run(
            [sys.executable, "-m", "mirror.cli", "-v", "run", "--config", str(config), "--once",
             "--source", src.bootstrap, "--source-security-protocol", "SASL_SSL", "--source-tls-ca-file", str(pki.ca),
             "--source-sasl-mechanism", "SCRAM-SHA-512", "--source-sasl-username", USER,
             "--source-sasl-password-env", "KMIRROR_TEST_SOURCE_PASSWORD", "--checkpoint", str(tmp_path / "ck")],
            capture_output=True, text=True, timeout=600,
            env={**os.environ, "KMIRROR_TEST_SOURCE_PASSWORD": SOURCE_PASSWORD})
        output = run.stdout + run.stderr
        assert run.returncode == 0, run.stderr[-5000:]
        expected = read_values(src.bootstrap, "orders", PARTITIONS,
                               **librdkafka_conf(pki, "SCRAM-SHA-512", password=SOURCE_PASSWORD))
        copied = read_values(dst.bootstrap, "orders", PARTITIONS,
                             **librdkafka_conf(pki, "SCRAM-SHA-512", password=DESTINATION_PASSWORD))
    assert sum(map(len, expected.values())) == PARTITIONS * BATCHES * PER_BATCH
    assert copied == expected
    assert " DEBUG " in output and "kmirror copied" in output  # the debug log was on, and is what was searched
    checkpoint = "".join(path.read_text(errors="replace") for path in (tmp_path / "ck").rglob("*") if path.is_file())
    broker_logs = "\n".join(record.getMessage() for record in caplog.records)
    for secret in (SOURCE_PASSWORD, DESTINATION_PASSWORD):
        assert secret not in output and secret not in broker_logs and secret not in checkpoint


def _long_running(src: EmbeddedBroker, dst: EmbeddedBroker, pki: Pki, topic: str, tmp_path) -> subprocess.Popen:
    """``kmirror run`` without ``--once`` between the two brokers (SASL_SSL, SCRAM-SHA-512, CA
    files), its passwords from the environment, as a service would be started."""
    flags = []
    for side in ("source", "destination"):
        flags += [f"--{side}-security-protocol", "SASL_SSL", f"--{side}-tls-ca-file", str(pki.ca),
                  f"--{side}-sasl-mechanism", "SCRAM-SHA-512", f"--{side}-sasl-username", USER,
                  f"--{side}-sasl-password-env", f"KMIRROR_TEST_{side.upper()}_PASSWORD"]
    return subprocess.Popen(
        [sys.executable, "-m", "mirror.cli", "run", "--source", src.bootstrap, "--destination", dst.bootstrap,
         "--topics", topic, "--checkpoint", str(tmp_path / "ck"), *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "KMIRROR_TEST_SOURCE_PASSWORD": SOURCE_PASSWORD,
             "KMIRROR_TEST_DESTINATION_PASSWORD": DESTINATION_PASSWORD})


def _create(src: EmbeddedBroker, pki: Pki, topic: str) -> None:
    with KafkaClient(src.bootstrap, security=kmirror_security(pki, "SCRAM-SHA-512", password=SOURCE_PASSWORD)) as client:
        client.create_topics([NewTopic(topic, PARTITIONS)])


def test_a_long_running_mirror_between_sasl_ssl_brokers_copies_a_live_stream_once_and_stops_on_sigterm(tmp_path):
    """Issue 60's acceptance on the embedded broker: resident copiers between SASL_SSL/SCRAM
    clusters with CA files (their leases carry both clusters' TLS and SASL settings)."""
    pki = Pki.create(tmp_path)
    with EmbeddedBroker(tmp_path / "src", security=_listener(pki, SOURCE_PASSWORD)) as src, \
            EmbeddedBroker(tmp_path / "dst", security=_listener(pki, DESTINATION_PASSWORD)) as dst:
        _create(src, pki, "meter")
        source_conf = librdkafka_conf(pki, "SCRAM-SHA-512", password=SOURCE_PASSWORD)
        destination_conf = librdkafka_conf(pki, "SCRAM-SHA-512", password=DESTINATION_PASSWORD)
        job = _long_running(src, dst, pki, "meter", tmp_path)
        writer = ProducerWriter(src.bootstrap, "meter", PARTITIONS, **source_conf)
        stderr = copy_live_then_sigterm(
            job, writer, lambda: read_values(dst.bootstrap, "meter", PARTITIONS, **destination_conf))
        assert read_values(dst.bootstrap, "meter", PARTITIONS, **destination_conf) == writer.written
    assert SOURCE_PASSWORD not in stderr and DESTINATION_PASSWORD not in stderr


def test_a_copier_that_cannot_read_its_lease_fails_the_job_with_its_reason(tmp_path):
    """The CA file the job was started with is gone when a later lease reaches the copier (as
    on an executor of another machine that lacks it): the copier refuses the lease, and the
    job's log and its exit line say which message and which field, not that it "went away"."""
    pki = Pki.create(tmp_path)
    with EmbeddedBroker(tmp_path / "src", security=_listener(pki, SOURCE_PASSWORD)) as src, \
            EmbeddedBroker(tmp_path / "dst", security=_listener(pki, DESTINATION_PASSWORD)) as dst:
        _create(src, pki, "meter")
        source_conf = librdkafka_conf(pki, "SCRAM-SHA-512", password=SOURCE_PASSWORD)
        job = _long_running(src, dst, pki, "meter", tmp_path)
        try:
            with ProducerWriter(src.bootstrap, "meter", PARTITIONS, **source_conf):
                wait_until(lambda: job.poll() is not None or read_values(
                    dst.bootstrap, "meter", PARTITIONS, **librdkafka_conf(
                        pki, "SCRAM-SHA-512", password=DESTINATION_PASSWORD))[0], "a first copy", 180, poll_s=1.0)
                assert job.poll() is None, "the job ended on its own"
                pki.ca.unlink()
                _, stderr = job.communicate(timeout=180)
        finally:
            if job.poll() is None:
                job.kill()
    assert job.returncode == 1, stderr[-5000:]
    errors = [line for line in stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, stderr[-5000:]
    assert "CopierRefusedError" in errors[0] and "Lease" in errors[0] and "tls.ca_file" in errors[0], errors
    assert "refused a message" in stderr  # the copier's own line, from the executor
    assert "went away" not in stderr and "Traceback" not in stderr, stderr[-5000:]
