"""Issue 60: every security setup a cluster may have, under both ways the job runs.

A long-running job hands its copy to resident copiers, whose leases carry the clusters'
settings across a socket; ``--once`` copies in Spark's tasks, which get them pickled by
Spark. The TLS case of the first failed for months-long jobs while ``--once`` passed, so
each setup runs both ways, between two embedded brokers with that setup:

- PLAINTEXT;
- SSL with a CA file;
- mTLS: the client's certificate and key in files of their own;
- SASL_SSL with SCRAM-SHA-512;
- SASL_PLAINTEXT with PLAIN.

The long-running job copies a live stream (librdkafka's idempotent producer writing while it
runs) and is stopped as a signal stops it. The verdict is librdkafka's: read_committed at
the destination, every record the producer wrote, once, in order.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from librdkafka_reader import read_values
from live_source import ProducerWriter, wait_until
from secure_brokers import PASSWORD, USER, Pki, librdkafka_conf, listener

from mirror.broker import EmbeddedBroker
from mirror.config import load_config

pytestmark = pytest.mark.slow

PARTITIONS = 3


@dataclass(frozen=True)
class Setup:
    protocol: str
    mechanism: str | None = None
    mtls: bool = False

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")


SETUPS = {
    "plaintext": Setup("PLAINTEXT"),
    "ssl": Setup("SSL"),
    "mtls": Setup("SSL", mtls=True),
    "sasl-ssl-scram-sha-512": Setup("SASL_SSL", "SCRAM-SHA-512"),
    "sasl-plaintext-plain": Setup("SASL_PLAINTEXT", "PLAIN"),
}


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki.create(tmp_path_factory.mktemp("matrix"))


@pytest.fixture(scope="module", params=list(SETUPS), ids=list(SETUPS))
def clusters(request, pki, tmp_path_factory):
    """Source and destination brokers with one setup, for both modes of the job."""
    setup = SETUPS[request.param]
    secured = {}
    if setup.protocol != "PLAINTEXT":
        secured["security"] = listener(pki if setup.tls else None, mtls=setup.mtls, sasl=setup.mechanism is not None)
    directory = tmp_path_factory.mktemp(request.param)
    with EmbeddedBroker(directory / "src", **secured) as src, EmbeddedBroker(directory / "dst", **secured) as dst:
        yield setup, src, dst


def _client_conf(setup: Setup, pki: Pki) -> dict:
    """librdkafka's settings for the setup (its own reader and writer, never kmirror's code)."""
    return librdkafka_conf(pki if setup.tls else None, setup.mechanism, mtls=setup.mtls)


def _kmirror_settings(prefix: str, bootstrap: str, setup: Setup, pki: Pki) -> dict:
    settings = {f"{prefix}.bootstrap": bootstrap, f"{prefix}.security_protocol": setup.protocol}
    if setup.tls:
        settings[f"{prefix}.tls.ca_file"] = str(pki.ca)
    if setup.mtls:
        settings.update({f"{prefix}.tls.cert_file": str(pki.client_cert), f"{prefix}.tls.key_file": str(pki.client_key)})
    if setup.mechanism is not None:
        settings.update({f"{prefix}.sasl.mechanism": setup.mechanism, f"{prefix}.sasl.username": USER,
                         f"{prefix}.sasl.password": PASSWORD})
    return settings


def _create_topic(bootstrap: str, topic: str, conf: dict) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **conf})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS)]).values():
        future.result(30)


@pytest.mark.parametrize("mode", ["once", "long-running"])
def test_every_record_is_copied_once_under_each_security_setup(clusters, pki, tmp_path, mode):
    from mirror.spark.job import run_mirror

    setup, src, dst = clusters
    conf = _client_conf(setup, pki)
    topic = f"matrix.{mode}"
    _create_topic(src.bootstrap, topic, conf)
    config = load_config(None, {**_kmirror_settings("source", src.bootstrap, setup, pki),
                                **_kmirror_settings("destination", dst.bootstrap, setup, pki),
                                "topics": topic, "name": f"matrix-{mode}", "once": mode == "once",
                                "checkpoint": str(tmp_path / "ck")})
    writer = ProducerWriter(src.bootstrap, topic, PARTITIONS, **conf)
    if mode == "once":
        with writer:
            wait_until(lambda: len(writer.written[0]) >= 300, "the source to fill", 60)
        totals = run_mirror(config)
        assert totals.counters.total_records == sum(map(len, writer.written.values()))
    else:
        stop, failed = threading.Event(), []

        def run() -> None:
            try:
                run_mirror(config, stop=stop)
            except BaseException as exc:  # noqa: BLE001 - reported in the test's thread
                failed.append(exc)

        job = threading.Thread(target=run)
        job.start()
        try:
            with writer:  # written while the job runs: copied by its resident copiers
                wait_until(lambda: failed or len(writer.written[0]) >= 300, "the live stream", 60)
            wait_until(lambda: failed or read_values(dst.bootstrap, topic, PARTITIONS, **conf) == writer.written,
                       "the job to copy the live stream", 120, poll_s=1.0)
        finally:
            stop.set()
            job.join(120)
        assert not job.is_alive() and not failed, failed
    copied = read_values(dst.bootstrap, topic, PARTITIONS, **conf)
    assert copied == writer.written  # every record, once, each partition in order, read_committed
