"""What a listener demands of its clients: its certificate, the client CA, the SASL users."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kcodecs import KMirrorError

__all__ = ["ListenerTls", "SaslUser", "ListenerSecurity", "SecuritySettingsError", "MECHANISMS"]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
"""The SASL mechanisms the broker serves, by their Kafka names (``sasl.enabled.mechanisms``)."""


class SecuritySettingsError(KMirrorError, ValueError):
    """Listener security settings that cannot work (a mechanism we do not serve, SASL without users)."""


@dataclass(frozen=True)
class ListenerTls:
    """Kafka's ``ssl.keystore.*`` as PEM files, and ``ssl.client.auth=required`` when
    ``client_ca_file`` is set: clients must then present a certificate that CA signed (mTLS)."""

    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None


@dataclass(frozen=True)
class SaslUser:
    """One user, who may log in with every enabled mechanism (Kafka keeps PLAIN users in the
    JAAS file and SCRAM credentials per mechanism; one list serves both here)."""

    name: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class ListenerSecurity:
    tls: ListenerTls | None = None
    sasl_mechanisms: tuple[str, ...] = ()
    users: tuple[SaslUser, ...] = ()

    def __post_init__(self) -> None:
        unknown = [m for m in self.sasl_mechanisms if m not in MECHANISMS]
        if unknown:
            raise SecuritySettingsError(f"unknown SASL mechanism {', '.join(unknown)} (served: {', '.join(MECHANISMS)})")
        if self.sasl_mechanisms and not self.users:
            raise SecuritySettingsError("SASL is enabled but no user is defined: no client could log in")
        if self.users and not self.sasl_mechanisms:
            raise SecuritySettingsError("SASL users are defined but no SASL mechanism is enabled")

    @property
    def protocol(self) -> str:
        """Kafka's name for the listener's security protocol."""
        return ("SASL_" if self.sasl_mechanisms else "") + ("SSL" if self.tls else "PLAINTEXT")
