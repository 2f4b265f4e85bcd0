"""How the client classes TLS failures (``mirror.kafka.security.tls_failure`` and
``KafkaConnection``): an alert by which a broker refuses our certificate is an
:class:`~mirror.kafka.AuthenticationError` that says so, whichever broker sent it; and, as in
Kafka's ``SslTransportLayer`` (its POST_HANDSHAKE state), a TLS error counts as a refusal only
until the broker's first answer: after it, it is a broken connection, which is retried.

The alerts the embedded broker sends are in tests/broker/test_listener_tls_alert.py; Kafka's,
in tests/realkafka/test_real_secure_mirror.py.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
import threading

import pytest
from secure_brokers import Pki

from mirror.kafka import AuthenticationError, ConnectionFailedError, KafkaConnection
from mirror.kafka.security import tls_failure


def _alert(reason: str) -> ssl.SSLError:
    error = ssl.SSLError(1, f"[SSL: {reason}] ...")
    error.reason = reason
    return error


@pytest.mark.parametrize("reason", [
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN", "SSLV3_ALERT_BAD_CERTIFICATE",  # Kafka 4.4: another CA's; none
    "TLSV1_ALERT_UNKNOWN_CA", "TLSV13_ALERT_CERTIFICATE_REQUIRED",  # the embedded broker: the same two
])
def test_an_alert_refusing_our_certificate_says_so(reason):
    for handshake in (True, False):
        error = tls_failure("b:9093", _alert(reason), handshake=handshake)
        assert isinstance(error, AuthenticationError)
        assert str(error).endswith(f"failed: {reason} (the broker refused our certificate)")


def test_other_tls_failures_keep_their_reason_alone():
    handshake_failure = tls_failure("b:9093", _alert("SSLV3_ALERT_HANDSHAKE_FAILURE"), handshake=True)
    assert str(handshake_failure) == "b:9093: authentication failed: TLS handshake failed: SSLV3_ALERT_HANDSHAKE_FAILURE"
    assert tls_failure("b:9093", ssl.SSLEOFError(8, "EOF occurred in violation of protocol")) is None


class OneTlsConnection:
    """A TLS server for one client: after the handshake it answers ``answers`` frames (4 bytes
    each, whatever was asked), then sends a record that cannot decrypt."""

    def __init__(self, pki: Pki, answers: int):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki.server)
        self._listening = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listening.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, args=(context, answers), daemon=True)
        self._thread.start()

    def _serve(self, context: ssl.SSLContext, answers: int) -> None:
        conn, _ = self._listening.accept()
        with context.wrap_socket(conn, server_side=True) as tls:
            for _ in range(answers):
                (size,) = struct.unpack(">i", _exactly(tls, 4))
                _exactly(tls, size)
                tls.sendall(struct.pack(">ii", 4, 1))
            os.write(tls.fileno(), b"\x17\x03\x03\x00\x20" + bytes(32))  # application data no key decrypts
            try:
                while os.read(tls.fileno(), 4096):  # until the client hangs up, so no reset overtakes that record
                    pass
            except ConnectionResetError:
                pass

    def close(self) -> None:
        self._thread.join(10)
        self._listening.close()


def _exactly(tls: ssl.SSLSocket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        data += tls.recv(n - len(data))
    return data


@pytest.mark.parametrize(("answers", "expected"), [(0, AuthenticationError), (1, ConnectionFailedError)])
def test_a_tls_error_is_a_refusal_only_before_the_brokers_first_answer(tmp_path, answers, expected):
    pki = Pki.create(tmp_path)
    server = OneTlsConnection(pki, answers)
    with KafkaConnection(server.address, timeout_s=10,
                         tls=ssl.create_default_context(cafile=pki.ca)) as connection:
        connection.send_raw(struct.pack(">i", 4) + b"ping")
        with pytest.raises((AuthenticationError, ConnectionFailedError)) as failed:
            for _ in range(answers + 1):
                assert connection.read_frame() == struct.pack(">i", 1)
    server.close()
    assert type(failed.value) is expected, failed.value
