"""The client's TLS and SASL: the copy engine between two SASL_SSL brokers, and every refusal
as a typed, permanent :class:`~mirror.kafka.AuthenticationError` that names no secret."""

from __future__ import annotations

import os
import socket
import ssl
import threading

import pytest
from librdkafka_reader import read_values
from pydantic import SecretStr
from secure_brokers import PASSWORD, USER, Pki, kmirror_security, librdkafka_conf, listener

import kcodecs
from kcodecs import Record
from mirror.broker import EmbeddedBroker
from mirror.broker.security import ListenerSecurity, SaslUser
from mirror.config import load_config
from mirror.engine import CopyRequest, copy_ranges, sync_destination_topics
from mirror.engine.failures import verdict
from mirror.kafka import (AuthenticationError, IdempotentProducer, KafkaClient, NewTopic, RetryPolicy,
                          SaslCredentials, Security, TlsSettings, TopicPartition)

PARTITIONS = 3


def test_the_copy_engine_mirrors_between_two_sasl_ssl_brokers(tmp_path):
    """Fetcher and pipelined producer over TLS: several responses can sit decrypted in the TLS
    layer, where select() does not see them."""
    pki = Pki.create(tmp_path)
    security = kmirror_security(pki, "SCRAM-SHA-512")
    with EmbeddedBroker(tmp_path / "src", security=listener(pki)) as src, \
            EmbeddedBroker(tmp_path / "dst", security=listener(pki)) as dst, \
            KafkaClient(src.bootstrap, security=security) as source, \
            KafkaClient(dst.bootstrap, security=security) as destination:
        source.create_topics([NewTopic("t", PARTITIONS)])
        produced: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        for b in range(30):
            for p in range(PARTITIONS):
                values = [b"%d-%d-%d" % (p, b, i) * 20 for i in range(50)]
                source.produce([(TopicPartition("t", p), kcodecs.build_batch(
                    [Record(key=None, value=v) for v in values], compression="lz4"))])
                produced[p] += values
        config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                    "topics": "t"})
        routes = sync_destination_topics(config, source, destination)
        producer = IdempotentProducer(destination, max_in_flight=5)
        try:
            copy_ranges([CopyRequest(TopicPartition("t", p), 0, 1500) for p in range(PARTITIONS)], routes, source,
                        producer, fetch_max_bytes=16 * 1024)
        finally:
            producer.close()
        assert read_values(dst.bootstrap, "t", PARTITIONS, **librdkafka_conf(pki, "SCRAM-SHA-512")) == produced


@pytest.fixture
def sasl_ssl(tmp_path):
    pki = Pki.create(tmp_path)
    with EmbeddedBroker(tmp_path / "data", security=listener(pki)) as broker:
        yield pki, broker


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_password_is_a_permanent_authentication_error_without_the_password(sasl_ssl, mechanism):
    pki, broker = sasl_ssl
    with KafkaClient(broker.bootstrap, security=kmirror_security(pki, mechanism, password="hunter2-wrong")) as client, \
            pytest.raises(AuthenticationError) as raised:
        client.topics()
    assert verdict(raised.value) == "permanent"
    assert f"{mechanism} as '{USER}'" in str(raised.value) and "invalid credentials" in str(raised.value)
    assert "hunter2" not in str(raised.value) + repr(raised.value)


def test_a_mechanism_the_broker_does_not_enable_is_named(tmp_path):
    only_plain = ListenerSecurity(sasl_mechanisms=("PLAIN",), users=(SaslUser(USER, PASSWORD),))
    with EmbeddedBroker(tmp_path / "data", security=only_plain) as broker, \
            KafkaClient(broker.bootstrap, security=kmirror_security(None, "SCRAM-SHA-512")) as client, \
            pytest.raises(AuthenticationError, match="does not enable SASL mechanism SCRAM-SHA-512 .it enables: PLAIN"):
        client.topics()


def test_a_broker_certificate_from_an_unknown_ca_is_refused(sasl_ssl, tmp_path):
    pki, broker = sasl_ssl
    stranger = Pki.create(tmp_path, "stranger")
    with KafkaClient(broker.bootstrap, security=kmirror_security(stranger, "PLAIN")) as client, \
            pytest.raises(AuthenticationError, match="certificate was refused: .*unable to get local issuer"):
        client.topics()


def test_a_tls_client_on_a_plaintext_port_is_told_so(tmp_path):
    pki = Pki.create(tmp_path)
    with EmbeddedBroker(tmp_path / "data") as broker, \
            KafkaClient(broker.bootstrap, security=kmirror_security(pki, None), retry=RetryPolicy(attempts=2)) as client, \
            pytest.raises(AuthenticationError, match="TLS handshake failed: .*is it a TLS listener"):
        client.topics()


def test_a_broker_that_refuses_our_certificate_is_an_authentication_error(tmp_path):
    """A TLS server that requires client certificates (as Kafka's ssl.client.auth=required),
    with a client that has none: the refusal is an alert at the first read under TLS 1.3."""
    pki = Pki.create(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server)
    context.load_verify_locations(pki.ca)
    context.verify_mode = ssl.CERT_REQUIRED
    listening = socket.create_server(("127.0.0.1", 0))

    def serve_one() -> None:
        conn, _ = listening.accept()
        tls = context.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        with pytest.raises(ssl.SSLError, match="PEER_DID_NOT_RETURN_A_CERTIFICATE"):
            tls.do_handshake()  # sends the alert
        while os.read(tls.fileno(), 4096):  # until the client hangs up: its request goes out before it reads the alert
            pass
        tls.close()

    server = threading.Thread(target=serve_one, daemon=True)
    server.start()
    address = f"127.0.0.1:{listening.getsockname()[1]}"
    with KafkaClient(address, security=kmirror_security(pki, None), retry=RetryPolicy(attempts=1)) as client, \
            pytest.raises(AuthenticationError, match="TLS (handshake )?failed: .*CERTIFICATE_REQUIRED"):
        client.topics()
    server.join(10)
    listening.close()


def test_unreadable_tls_files_fail_when_the_client_is_made(tmp_path):
    with pytest.raises(AuthenticationError, match="cannot load"):
        KafkaClient("127.0.0.1:1", security=Security(tls=TlsSettings(ca_file=tmp_path / "missing.pem")))


def test_settings_never_show_the_password():
    security = Security(sasl=SaslCredentials("PLAIN", USER, SecretStr(PASSWORD)))
    assert PASSWORD not in repr(security) + str(security) and security.protocol == "SASL_PLAINTEXT"
    assert Security(tls=TlsSettings()).protocol == "SSL" and Security().protocol == "PLAINTEXT"
