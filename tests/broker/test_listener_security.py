"""Listener security of the embedded broker: TLS, mTLS and SASL (PLAIN, SCRAM-SHA-256/512).

Unmodified librdkafka and kafka-python clients produce and consume with each security
protocol. Refusals (a wrong password, a client certificate from another CA, a plaintext
client on the TLS port, a request before authentication) are logged with their reason, end
that one connection, and the broker goes on serving everyone else.
"""

from __future__ import annotations

import argparse
import logging
import time

import kafka.errors as kerr
import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from librdkafka_reader import read_values
from secure_brokers import PASSWORD, USER, Pki, kmirror_security, librdkafka_conf, listener

from mirror.broker import BrokerProcess, EmbeddedBroker
from mirror.broker.security import Credentials, ListenerSecurity, SaslUser, Session
from mirror.broker.security.settings import SecuritySettingsError
from mirror.kafka import (AuthenticationError, ConnectionFailedError, KafkaClient,
                          KafkaConnection, NewTopic, RetryPolicy, Security, TlsSettings)

VALUES = [b"value-%d" % i for i in range(20)]


def _produce_and_read_with_librdkafka(bootstrap: str, conf: dict, topic: str = "t") -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for value in VALUES:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    return read_values(bootstrap, topic, 1, **conf)[0]


@pytest.mark.interop
@pytest.mark.parametrize(("tls", "mechanism", "mtls"), [
    (True, "SCRAM-SHA-512", False), (True, "SCRAM-SHA-256", False), (True, "PLAIN", False),
    (False, "SCRAM-SHA-512", False), (True, None, False), (True, None, True), (True, "SCRAM-SHA-512", True),
], ids=["SASL_SSL-SCRAM-SHA-512", "SASL_SSL-SCRAM-SHA-256", "SASL_SSL-PLAIN", "SASL_PLAINTEXT-SCRAM-SHA-512", "SSL",
        "mTLS", "mTLS-SASL_SSL-SCRAM-SHA-512"])
def test_librdkafka_produces_and_consumes_unchanged(tmp_path, tls, mechanism, mtls):
    pki = Pki.create(tmp_path) if tls else None
    security = listener(pki, mtls=mtls, sasl=mechanism is not None)
    with EmbeddedBroker(tmp_path / "data", security=security, auto_create_topics=True) as broker:
        assert _produce_and_read_with_librdkafka(broker.bootstrap, librdkafka_conf(pki, mechanism, mtls=mtls)) == VALUES


@pytest.mark.interop
def test_kafka_python_produces_and_consumes_over_sasl_ssl_with_scram_sha_512(tmp_path):
    pki = Pki.create(tmp_path)
    conf = dict(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=USER,
                sasl_plain_password=PASSWORD, ssl_cafile=str(pki.ca))
    with EmbeddedBroker(tmp_path / "data", security=listener(pki), auto_create_topics=True) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, **conf)
        for value in VALUES:
            producer.send("t", value)
        producer.flush(30)
        producer.close()
        consumer = KafkaConsumer("t", bootstrap_servers=broker.bootstrap, group_id=None, auto_offset_reset="earliest",
                                 consumer_timeout_ms=3000, **conf)
        assert [record.value for record in consumer] == VALUES
        consumer.close()


def _warnings(caplog) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


@pytest.mark.interop
def test_a_wrong_password_is_refused_logged_and_the_broker_serves_others(tmp_path, caplog):
    pki = Pki.create(tmp_path)
    errors: list[KafkaError] = []
    with EmbeddedBroker(tmp_path / "data", security=listener(pki), auto_create_topics=True) as broker:
        wrong = Producer({"bootstrap.servers": broker.bootstrap, "error_cb": errors.append,
                          **librdkafka_conf(pki, "SCRAM-SHA-512", password="not-the-password")})
        deadline = time.monotonic() + 30
        while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            assert time.monotonic() < deadline, errors
            wrong.poll(0.1)
        assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in str(errors)
        # Meanwhile everyone else is served.
        assert _produce_and_read_with_librdkafka(broker.bootstrap, librdkafka_conf(pki, "SCRAM-SHA-512")) == VALUES
        del wrong
    assert f"with SCRAM-SHA-512 failed: wrong password (user '{USER}')" in _warnings(caplog)
    assert "not-the-password" not in caplog.text and PASSWORD not in caplog.text


def test_a_client_certificate_from_another_ca_is_refused_and_logged(tmp_path, caplog):
    """Refused with a TLS alert (mirror.broker.security.tls.AlertingTlsProtocol), which the
    client takes as an authentication failure, not an outage."""
    pki, stranger = Pki.create(tmp_path), Pki.create(tmp_path, "stranger")
    once = RetryPolicy(attempts=1)
    with EmbeddedBroker(tmp_path / "data", security=listener(pki, mtls=True, sasl=False)) as broker:
        foreign = Security(tls=TlsSettings(ca_file=pki.ca, cert_file=stranger.client))
        with KafkaClient(broker.bootstrap, security=foreign, retry=once) as client, \
                pytest.raises(AuthenticationError):
            client.topics()
        with KafkaClient(broker.bootstrap, security=kmirror_security(pki, None), retry=once) as client, \
                pytest.raises(AuthenticationError):
            client.topics()  # no certificate at all
        with KafkaClient(broker.bootstrap, security=kmirror_security(pki, None, mtls=True)) as client:
            client.create_topics([NewTopic("served", 1)])
            assert "served" in client.topics()
    reasons = {line.rpartition("TLS failed: ")[2] for line in _warnings(caplog).splitlines() if "TLS failed" in line}
    assert reasons == {"CERTIFICATE_VERIFY_FAILED", "PEER_DID_NOT_RETURN_A_CERTIFICATE"}, _warnings(caplog)


def test_a_plaintext_client_on_the_tls_port_is_closed_and_logged(tmp_path, caplog):
    pki = Pki.create(tmp_path)
    with EmbeddedBroker(tmp_path / "data", security=listener(pki, sasl=False)) as broker:
        with KafkaConnection(broker.bootstrap) as plain, pytest.raises(ConnectionFailedError):
            plain.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        with KafkaClient(broker.bootstrap, security=kmirror_security(pki, None)) as client:
            assert client.brokers() == {0: broker.bootstrap}
    assert "TLS failed" in _warnings(caplog)


def test_only_the_authentication_apis_are_served_before_authentication(tmp_path, caplog):
    with EmbeddedBroker(tmp_path / "data", security=listener(None)) as broker:
        with KafkaConnection(broker.bootstrap) as early:
            versions = early.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
            assert {17, 36} <= {api.api_key for api in versions.api_keys}
            with pytest.raises(ConnectionFailedError):
                early.call(MetadataRequest(topics=None, allow_auto_topic_creation=False), 1)
        with KafkaClient(broker.bootstrap, security=kmirror_security(None, "PLAIN")) as client:
            assert client.brokers() == {0: broker.bootstrap}
    assert "MetadataRequest before SASL authentication" in _warnings(caplog)


# ---- the state machine alone ------------------------------------------------------------------

CREDENTIALS = Credentials(ListenerSecurity(sasl_mechanisms=("PLAIN", "SCRAM-SHA-256"), users=(SaslUser("u", "p"),)))


def test_plain_checks_the_password_and_that_the_authorization_id_is_the_user(caplog):
    good = Session(CREDENTIALS, "peer:1")
    assert not good.permits(3) and good.handshake("PLAIN") == 0
    assert good.authenticate(b"\0u\0p").error_code == 0 and good.authenticated and good.permits(3)
    assert good.handshake("PLAIN") == kerr.IllegalSaslStateError.errno  # no re-authentication
    for token in (b"\0u\0wrong", b"\0nobody\0p", b"other\0u\0p", b"u\0p"):
        session = Session(CREDENTIALS, "peer:2")
        session.handshake("PLAIN")
        outcome = session.authenticate(token)
        assert outcome.error_code == kerr.SaslAuthenticationFailedError.errno and session.failed
        assert not session.authenticated and "invalid credentials" in outcome.error_message
    assert "wrong" not in outcome.error_message and "failed: wrong password or unknown user 'u'" in caplog.text


def test_a_mechanism_not_enabled_and_out_of_order_requests_are_refused():
    session = Session(CREDENTIALS, "peer:1")
    assert session.handshake("SCRAM-SHA-512") == kerr.UnsupportedSaslMechanismError.errno and session.failed
    assert session.enabled == ["PLAIN", "SCRAM-SHA-256"]
    early = Session(CREDENTIALS, "peer:2")
    assert early.authenticate(b"\0u\0p").error_code == kerr.IllegalSaslStateError.errno and early.failed
    plaintext = Session(None, "peer:3")
    assert plaintext.permits(3) and plaintext.handshake("PLAIN") == kerr.IllegalSaslStateError.errno


def test_listener_settings_that_cannot_work_are_refused():
    with pytest.raises(SecuritySettingsError, match="unknown SASL mechanism GSSAPI"):
        ListenerSecurity(sasl_mechanisms=("GSSAPI",), users=(SaslUser("u", "p"),))
    with pytest.raises(SecuritySettingsError, match="no user"):
        ListenerSecurity(sasl_mechanisms=("PLAIN",))
    with pytest.raises(SecuritySettingsError, match="no SASL mechanism"):
        ListenerSecurity(users=(SaslUser("u", "p"),))
    assert "p'" not in repr(SaslUser("u", "p")) and ListenerSecurity().protocol == "PLAINTEXT"


# ---- kmirror broker's flags -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.interop
def test_kmirror_broker_serves_sasl_ssl_from_its_flags(tmp_path):
    pki = Pki.create(tmp_path)
    users = tmp_path / "users"
    users.write_text(f"# who may log in\n{USER}:{PASSWORD}\nother:pass:with:colons\n")
    broker = BrokerProcess(tmp_path / "data", extra_args=(
        "--auto-create-topics", "--tls-cert-file", str(pki.server), "--sasl-mechanisms", "SCRAM-SHA-512,PLAIN",
        "--sasl-users-file", str(users))).start()
    try:
        assert _produce_and_read_with_librdkafka(broker.bootstrap, librdkafka_conf(pki, "SCRAM-SHA-512")) == VALUES
        with KafkaClient(broker.bootstrap, security=kmirror_security(pki, "PLAIN", password="pw-wrong-7c1")) as client, \
                pytest.raises(AuthenticationError):
            client.topics()
    finally:
        assert broker.terminate() == 0
    assert any("with PLAIN failed: wrong password" in line for line in broker.log_lines)
    assert not any(PASSWORD in line or "pw-wrong-7c1" in line for line in broker.log_lines)


def test_the_users_file_and_unusable_flags_are_refused_with_one_line(tmp_path, capsys):
    from mirror.broker.cli import add_arguments
    from mirror.broker.security.cli import listener_security, read_users

    users = tmp_path / "users"
    users.write_text("\n# comment\nalice:a:b\n")
    assert read_users(users) == (SaslUser("alice", "a:b"),)
    users.write_text("alice-without-password\n")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    for flags, message in [(["--sasl-mechanisms", "PLAIN", "--sasl-users-file", str(users)], "line 1: expected user:password"),
                           (["--sasl-mechanisms", "PLAIN"], "no user is defined"),
                           (["--tls-cert-file", str(tmp_path / "missing.pem")], "cannot load the listener's TLS files"),
                           (["--tls-client-ca-file", str(users)], "need --tls-cert-file")]:
        with pytest.raises(SystemExit) as exited:
            listener_security(parser.parse_args(["--data-dir", str(tmp_path), *flags]))
        assert exited.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.interop
def test_large_fetches_over_tls_are_read_from_the_file_and_encrypted(tmp_path, monkeypatch):
    """On a TLS listener a large fetch's file regions (sent with sendfile on plaintext) are read
    and written through TLS: librdkafka reads every record back."""
    from mirror.broker.log import SENDFILE_MIN_BYTES, FileRegion

    sent = []
    real_read = FileRegion.read
    monkeypatch.setattr(FileRegion, "read", lambda self: sent.append(self.size) or real_read(self))
    pki = Pki.create(tmp_path)
    conf = librdkafka_conf(pki, None)
    values = [(b"%05d-" % i) * 300 for i in range(1500)]  # 1.8 KB each, 2.7 MB in all
    with EmbeddedBroker(tmp_path / "data", security=listener(pki, sasl=False), auto_create_topics=True) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **conf})
        for value in values:
            producer.produce("big", value)
        assert producer.flush(30) == 0
        assert read_values(broker.bootstrap, "big", 1, **conf)[0] == values
    assert sent and all(size >= SENDFILE_MIN_BYTES for size in sent)
