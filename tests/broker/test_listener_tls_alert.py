"""An mTLS listener (``ssl.client.auth=required``) that refuses a client's certificate tells
the client so with OpenSSL's alert, as Kafka's brokers do, instead of only closing the
connection (which asyncio alone does: CPython gh-98078).

Told, every client fails at once with an authentication error: Python's ssl module reads the
alert under TLS 1.2 and 1.3, librdkafka names it rather than reporting a lost connection,
kmirror's client raises :class:`~mirror.kafka.AuthenticationError` on its first attempt,
and ``kmirror run`` exits with code 2 and one line, where a closed connection would be
waited out as an outage. Under TLS 1.3 the client's handshake is over before the broker
checks its certificate, so the alert comes at the client's first read.
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaError, Producer
from secure_brokers import Pki, librdkafka_conf, listener

from mirror.broker import EmbeddedBroker
from mirror.engine.failures import verdict
from mirror.kafka import AuthenticationError, KafkaClient, RetryPolicy, Security, TlsSettings


@pytest.fixture
def mtls(tmp_path):
    """The broker's PKI, a stranger's (its own CA, which the broker does not trust), the broker."""
    pki, stranger = Pki.create(tmp_path), Pki.create(tmp_path, "stranger")
    with EmbeddedBroker(tmp_path / "data", security=listener(pki, mtls=True, sasl=False)) as broker:
        yield pki, stranger, broker


ALERTS = {
    (ssl.TLSVersion.TLSv1_3, "stranger's"): "TLSV1_ALERT_UNKNOWN_CA",
    (ssl.TLSVersion.TLSv1_3, "none"): "TLSV13_ALERT_CERTIFICATE_REQUIRED",
    (ssl.TLSVersion.TLSv1_2, "stranger's"): "TLSV1_ALERT_UNKNOWN_CA",
    (ssl.TLSVersion.TLSv1_2, "none"): "SSLV3_ALERT_HANDSHAKE_FAILURE",
}


@pytest.mark.parametrize(("version", "certificate"), ALERTS, ids=[f"{v.name}-{c}" for v, c in ALERTS])
def test_a_refused_client_certificate_is_answered_with_an_alert(mtls, caplog, version, certificate):
    pki, stranger, broker = mtls
    context = ssl.create_default_context(cafile=pki.ca)
    context.minimum_version = context.maximum_version = version
    if certificate == "stranger's":
        context.load_cert_chain(stranger.client)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as raw, \
            pytest.raises(ssl.SSLError) as refused:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.recv(1)  # TLS 1.3: our handshake is done; the broker's verdict comes now
    assert refused.value.reason == ALERTS[version, certificate]  # not an SSLEOFError: the connection just closing
    assert "TLS failed: " + ("CERTIFICATE_VERIFY_FAILED" if certificate == "stranger's"
                             else "PEER_DID_NOT_RETURN_A_CERTIFICATE") in caplog.text


@pytest.mark.interop
def test_librdkafka_reports_the_alert_not_a_lost_connection(mtls):
    """Under TLS 1.3 librdkafka's handshake is over when the alert comes, in its first
    receive (APIVERSION_QUERY): it reports a transport error that names the alert."""
    pki, stranger, broker = mtls
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "error_cb": errors.append,
                         **librdkafka_conf(pki, None),
                         "ssl.certificate.location": str(stranger.client), "ssl.key.location": str(stranger.client)})
    deadline = time.monotonic() + 30
    while not errors:
        assert time.monotonic() < deadline, "librdkafka reported nothing"
        producer.poll(0.1)
    del producer
    assert "tlsv1 alert unknown ca: SSL alert number 48" in errors[0].str(), errors


class CountingClient(KafkaClient):
    """Counts the connections the client opens: one per attempt."""

    connections = 0

    def connect(self, address):
        self.connections += 1
        return super().connect(address)


@pytest.mark.parametrize("certificate", ["stranger's", "none"])
def test_kmirrors_client_raises_an_authentication_error_on_its_first_attempt(mtls, certificate):
    pki, stranger, broker = mtls
    security = Security(tls=TlsSettings(ca_file=pki.ca, cert_file=stranger.client if certificate == "stranger's" else None))
    with CountingClient(broker.bootstrap, security=security, retry=RetryPolicy(attempts=5, initial_backoff_s=0.01)) as client, \
            pytest.raises(AuthenticationError) as refused:
        client.topics()
    assert client.connections == 1  # not retried: neither as a broken connection nor with ApiVersions v0
    assert verdict(refused.value) == "permanent"
    reason = "TLSV1_ALERT_UNKNOWN_CA" if certificate == "stranger's" else "TLSV13_ALERT_CERTIFICATE_REQUIRED"
    assert str(refused.value) == (f"{broker.bootstrap}: authentication failed: TLS failed: {reason}"
                                  " (the broker refused our certificate)")


@pytest.mark.slow
def test_kmirror_run_exits_2_with_one_line_when_its_certificate_is_refused(mtls, tmp_path):
    """No ``--once`` and no ``--max-outage``: a refusal taken for an outage would be waited out
    until the subprocess timeout."""
    pki, stranger, broker = mtls
    with EmbeddedBroker(tmp_path / "destination") as destination:
        done = subprocess.run(
            [sys.executable, "-m", "mirror.cli", "run", "--source", broker.bootstrap, "--source-security-protocol", "SSL",
             "--source-tls-ca-file", str(pki.ca), "--source-tls-cert-file", str(stranger.client),
             "--destination", destination.bootstrap, "--topics", ".*", "--checkpoint", str(tmp_path / "ck")],
            capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 2, done.stderr[-5000:]
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, done.stderr[-5000:]
    assert f"{broker.bootstrap}: authentication failed: TLS failed: TLSV1_ALERT_UNKNOWN_CA" in errors[0]
    assert "Traceback" not in done.stderr and "outage" not in done.stderr and "unreachable" not in done.stderr


def test_a_connection_still_in_its_handshake_is_closed_when_the_broker_stops(tmp_path):
    """A client that sent its ClientHello and nothing more is not waited for (asyncio's
    handshake timeout is a minute): stopping the broker closes its connection."""
    pki = Pki.create(tmp_path)
    broker = EmbeddedBroker(tmp_path / "data", security=listener(pki, mtls=True, sasl=False)).start()
    outgoing = ssl.MemoryBIO()
    handshake = ssl.create_default_context(cafile=pki.ca).wrap_bio(ssl.MemoryBIO(), outgoing,
                                                                   server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        handshake.do_handshake()
    with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as silent:
        silent.sendall(outgoing.read())  # the ClientHello
        assert silent.recv(65536)  # the broker's first flight: accepted, the handshake under way
        broker.stop()
        while silent.recv(65536):  # the rest of that flight, then the end (a timeout if left open)
            pass
