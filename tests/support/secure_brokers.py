"""Certificates (trustme) and listener settings for the TLS and SASL tests, and the matching
settings of each client: librdkafka's properties, kafka-python's arguments, kmirror's
:class:`~mirror.kafka.Security`.

Imported as ``secure_brokers`` (tests/support/ is on ``sys.path``: pyproject's ``pythonpath``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme
from pydantic import SecretStr

from mirror.broker.security import MECHANISMS, ListenerSecurity, ListenerTls, SaslUser
from mirror.kafka import SaslCredentials, Security, TlsSettings

USER = "mirror-user"
PASSWORD = "pw-4f1c9e7a-do-not-log"
"""Distinctive, so a test can grep every log for it."""


@dataclass(frozen=True)
class Pki:
    """A CA, a broker certificate for 127.0.0.1 and localhost, and a client certificate, as PEM files."""

    ca: Path
    server: Path
    """The broker's key and certificate chain in one file."""
    client: Path
    """The client's key and certificate chain in one file (mTLS)."""
    client_cert: Path
    """The same certificate chain alone, for clients given the key in a file of its own."""
    client_key: Path
    """The same private key alone."""

    @classmethod
    def create(cls, directory: Path, name: str = "pki") -> "Pki":
        directory = directory / name
        directory.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        paths = cls(*(directory / f"{part}.pem" for part in ("ca", "server", "client", "client-cert", "client-key")))
        ca.cert_pem.write_to_path(paths.ca)
        ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(paths.server)
        client = ca.issue_cert("kmirror-client@example.com")
        client.private_key_and_cert_chain_pem.write_to_path(paths.client)
        client.private_key_pem.write_to_path(paths.client_key)
        paths.client_cert.write_bytes(b"".join(pem.bytes() for pem in client.cert_chain_pems))
        return paths


def listener(pki: Pki | None, *, mtls: bool = False, sasl: bool = True) -> ListenerSecurity:
    """The broker side: TLS if ``pki`` is given (client certificates required with ``mtls``),
    every mechanism for :data:`USER` with ``sasl``."""
    tls = ListenerTls(pki.server, pki.server, pki.ca if mtls else None) if pki is not None else None
    return ListenerSecurity(tls=tls, sasl_mechanisms=MECHANISMS if sasl else (),
                            users=(SaslUser(USER, PASSWORD),) if sasl else ())


def librdkafka_conf(pki: Pki | None, mechanism: str | None, *, password: str = PASSWORD, mtls: bool = False) -> dict:
    conf: dict = {"security.protocol": ("SASL_" if mechanism else "") + ("SSL" if pki else "PLAINTEXT")}
    if pki is not None:
        conf["ssl.ca.location"] = str(pki.ca)
        if mtls:
            conf.update({"ssl.certificate.location": str(pki.client), "ssl.key.location": str(pki.client)})
    if mechanism is not None:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": USER, "sasl.password": password})
    return conf


def kmirror_security(pki: Pki | None, mechanism: str | None, *, password: str = PASSWORD,
                     mtls: bool = False) -> Security:
    tls = TlsSettings(ca_file=pki.ca, cert_file=pki.client if mtls else None) if pki is not None else None
    sasl = SaslCredentials(mechanism, USER, SecretStr(password)) if mechanism is not None else None
    return Security(tls=tls, sasl=sasl)
