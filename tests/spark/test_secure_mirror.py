"""Acceptance of issue 13 (TLS and SASL): ``kmirror run --once`` between two SASL_SSL
(SCRAM-SHA-512) embedded brokers copies exactly what librdkafka reads at the source, and no
password shows anywhere: not in the run's stdout or stderr at DEBUG (driver, planner,
executors, JVM), not in the brokers' log records, not in the checkpoint."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
from librdkafka_reader import read_values
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
