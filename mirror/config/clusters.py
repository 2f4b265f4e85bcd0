"""``[clusters]``: the two clusters (how to reach them, their security), which source topics are
mirrored and what they are called at the destination."""

from __future__ import annotations

import re
import string
from typing import Any, Literal

from pydantic import Field, FilePath, field_validator, model_validator

from ..kafka.security import SaslCredentials, Security, TlsSettings
from ..replication import SEPARATOR, IdentityPolicy, PrefixPolicy, RenamePolicy, ReplicationPolicy, alias_of, is_cycle
from .base import Secret, Strict, cli, compiles, secret_from_env

__all__ = ["TlsConfig", "SaslConfig", "ClusterConfig", "Clusters", "TOPIC_CHARS", "ALIAS_CHARS"]

TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]{1,249}")
"""Kafka's legal topic names (``Topic.validate``)."""
ALIAS_CHARS = re.compile(r"[a-zA-Z0-9_-]{1,100}")
"""A cluster alias kmirror accepts: it starts topic names, so no '.', the default separator."""
_KAFKA_INTERNAL = "__"
"""Kafka's internal topics (``__consumer_offsets``, ``__transaction_state``); kmirror's own are
left out by the engine, which names them (:mod:`mirror.engine.own_topics`)."""


class TlsConfig(Strict):
    """TLS to the cluster's brokers, for ``security_protocol`` SSL and SASL_SSL (Kafka's ``ssl.*``)."""

    ca_file: FilePath | None = Field(
        None, description="PEM file of the CA certificates that sign the brokers' certificates (default: the "
        "system's trust store)", json_schema_extra=cli("FILE", group="security"))
    cert_file: FilePath | None = Field(
        None, description="PEM file of our certificate, for brokers that require client certificates (mTLS); "
        "may hold the key too", json_schema_extra=cli("FILE", group="security"))
    key_file: FilePath | None = Field(None, description="PEM file of the certificate's private key, if not in cert_file",
                                      json_schema_extra=cli("FILE", group="security"))
    key_password: Secret | None = Field(None, description="password of an encrypted private key",
                                        json_schema_extra=cli(group="security"))
    key_password_env: str | None = Field(None, description="environment variable holding key_password",
                                         json_schema_extra=cli("VAR", group="security"))
    check_hostname: bool = Field(True, description="the broker's certificate must name the host connected to",
                                 json_schema_extra=cli(group="security"))

    @model_validator(mode="before")
    @classmethod
    def _key_password_from_env(cls, data: Any) -> Any:
        return secret_from_env(data, "key_password")

    @model_validator(mode="after")
    def _key_needs_cert(self) -> "TlsConfig":
        if self.key_file is not None and self.cert_file is None:
            raise ValueError("key_file is set without cert_file")
        return self

    def settings(self) -> TlsSettings:
        return TlsSettings(self.ca_file, self.cert_file, self.key_file, self.key_password, self.check_hostname)


class SaslConfig(Strict):
    """SASL authentication, for ``security_protocol`` SASL_PLAINTEXT and SASL_SSL."""

    mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = Field(description="Kafka's sasl.mechanism",
                                                                          json_schema_extra=cli(group="security"))
    username: str = Field(min_length=1, description="SASL user name", json_schema_extra=cli("USER", group="security"))
    password: Secret | None = Field(None, description="the password, in the file (see password_env)",
                                    json_schema_extra=cli(group="security"))
    password_env: str | None = Field(
        None, description="name of the environment variable holding the password, read when the configuration "
        "is loaded", json_schema_extra=cli("VAR", group="security"))

    @model_validator(mode="before")
    @classmethod
    def _password_from_env(cls, data: Any) -> Any:
        return secret_from_env(data, "password")

    @model_validator(mode="after")
    def _has_password(self) -> "SaslConfig":
        if self.password is None:
            raise ValueError("password or password_env is required")
        return self


class ClusterConfig(Strict):
    """How to reach one Kafka cluster: its brokers, its timeout, its security."""

    bootstrap: tuple[str, ...] = Field(min_length=1, description="HOST:PORT addresses, any broker of the cluster",
                                       json_schema_extra=cli("HOST:PORT[,...]"))
    client_id: str = Field("kmirror", min_length=1, description="client.id sent with every request",
                           json_schema_extra=cli("ID"))
    request_timeout_s: float = Field(30.0, gt=0, description="socket timeout per request",
                                     json_schema_extra=cli(group="limits"))
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="Kafka's security.protocol: TLS for SSL and SASL_SSL, SASL authentication for "
        "SASL_PLAINTEXT and SASL_SSL", json_schema_extra=cli(group="security"))
    tls: TlsConfig | None = Field(None, description="TLS files ([clusters.source.tls]); SSL and SASL_SSL only",
                                  json_schema_extra=cli(group="security"))
    sasl: SaslConfig | None = Field(None, description="SASL credentials ([clusters.source.sasl]); required by SASL_*",
                                    json_schema_extra=cli(group="security"))

    @field_validator("bootstrap", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return tuple(part.strip() for part in value.split(",") if part.strip()) if isinstance(value, str) else value

    @field_validator("bootstrap")
    @classmethod
    def _host_ports(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for address in value:
            host, sep, port = address.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
                raise ValueError(f"expected HOST:PORT with a port from 1 to 65535, got {address!r}")
        return value

    @model_validator(mode="after")
    def _security_fits_protocol(self) -> "ClusterConfig":
        protocol = self.security_protocol
        if protocol.startswith("SASL_") and self.sasl is None:
            raise ValueError(f"security_protocol {protocol} needs a sasl table (mechanism, username, password "
                             f"or password_env)")
        if not protocol.startswith("SASL_") and self.sasl is not None:
            raise ValueError(f"sasl is set but security_protocol is {protocol}, not SASL_PLAINTEXT or SASL_SSL")
        if not protocol.endswith("SSL") and self.tls is not None:
            raise ValueError(f"tls is set but security_protocol is {protocol}, not SSL or SASL_SSL")
        return self

    def security(self) -> Security:
        """The client's view: what :class:`~mirror.kafka.KafkaClient` connects with."""
        tls = (self.tls or TlsConfig()).settings() if self.security_protocol.endswith("SSL") else None
        sasl = self.sasl and SaslCredentials(self.sasl.mechanism, self.sasl.username, self.sasl.password)
        return Security(tls, sasl)


class Clusters(Strict):
    """The two clusters, the source topics mirrored, and their names at the destination."""

    source: ClusterConfig = Field(json_schema_extra=cli("HOST:PORT[,...]"))
    destination: ClusterConfig = Field(json_schema_extra=cli("HOST:PORT[,...]"))
    topics: str = Field(description="regular expression; source topics whose whole name matches are mirrored",
                        json_schema_extra=cli("REGEX"))
    exclude: str | None = Field(None, description="regular expression; matching topics are left out",
                                json_schema_extra=cli("REGEX"))
    rename: str = Field("{topic}", description="destination topic name, a format string over {topic}, for names "
                        "neither replication policy gives (default {topic})", json_schema_extra=cli("FORMAT"))
    replication_policy: Literal["identity", "prefix"] = Field(
        "identity", description="how destination topics are named, as MirrorMaker 2's policies: identity, the "
        "source's name (IdentityReplicationPolicy); prefix, '<source alias>.<name>' (DefaultReplicationPolicy). "
        "Either way a topic mirrored from the destination is never mirrored back to it")
    source_alias: str | None = Field(
        None, description="the source cluster's name in prefixed topic names (default: derived from its first "
        "bootstrap address, e.g. 127-0-0-1-9092)", json_schema_extra=cli("NAME"))
    destination_alias: str | None = Field(
        None, description="the destination cluster's name: prefixed source topics that came from it are never "
        "mirrored back (default: derived from its first bootstrap address)", json_schema_extra=cli("NAME"))
    replication_separator: str = Field(
        SEPARATOR, description="between the source alias and the topic name under replication_policy prefix "
        "(MirrorMaker 2's replication.policy.separator); no alias may contain it", json_schema_extra=cli("SEP"))
    flow_topics: tuple[str, ...] = Field(
        (), description="set by kmirror failback, never by hand: the topics of a flow failed over, mirrored "
        "back though their provenance names the destination, since from the promotion point on their records "
        "are the source's own", json_schema_extra={"internal": True})

    @field_validator("topics", "exclude")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            compiles(value)
        return value

    @field_validator("source_alias", "destination_alias")
    @classmethod
    def _alias(cls, value: str | None) -> str | None:
        # It becomes a topic name's prefix, before the separator it must not contain.
        if value is not None and not ALIAS_CHARS.fullmatch(value):
            raise ValueError(f"{value!r} must be letters, digits, '_' or '-' (it starts topic names, before a '.')")
        return value

    @field_validator("replication_separator")
    @classmethod
    def _separator(cls, value: str) -> str:
        # It becomes part of every prefixed topic name.
        if not TOPIC_CHARS.fullmatch(value):
            raise ValueError(f"{value!r} must be letters, digits, '.', '_' or '-' (it is part of topic names)")
        return value

    @field_validator("rename")
    @classmethod
    def _rename(cls, value: str) -> str:
        fields = {name for _, name, _, _ in string.Formatter().parse(value) if name is not None}
        if fields != {"topic"}:
            raise ValueError(f"must use {{topic}} and no other field, got {value!r}")
        if not TOPIC_CHARS.fullmatch(value.format(topic="t")):
            raise ValueError(f"{value!r} does not make a legal Kafka topic name (letters, digits, '.', '_', '-')")
        return value

    @model_validator(mode="after")
    def _one_naming(self) -> "Clusters":
        if self.replication_policy != "identity" and self.rename != "{topic}":
            raise ValueError(f"rename {self.rename!r} and replication_policy {self.replication_policy!r} both name "
                             "destination topics: choose one")
        return self

    @model_validator(mode="after")
    def _aliases_without_separator(self) -> "Clusters":
        """Under ``prefix`` a name is cut at the separator's first occurrence to find its source
        (``DefaultReplicationPolicy.topicSource``): an alias holding it would be cut too, and
        cycles would go unseen. A derived alias counts, so a separator '-' needs named clusters."""
        if self.replication_policy != "prefix":
            return self
        for name, alias in (("source_alias", self.source_cluster_alias),
                            ("destination_alias", self.destination_cluster_alias)):
            separator = self.replication_separator
            if separator in alias:
                raise ValueError(f"{name} {alias!r} contains the replication separator {separator!r}: topic names "
                                 f"could not tell where they came from; set {name} without it")
        return self

    @model_validator(mode="after")
    def _no_loop(self) -> "Clusters":
        if set(self.source.bootstrap) & set(self.destination.bootstrap) and self.rename == "{topic}":
            raise ValueError("source and destination share a broker and rename is '{topic}': "
                             "the mirror would copy topics onto themselves; set rename, e.g. 'mirror.{topic}'")
        return self

    @property
    def policy(self) -> ReplicationPolicy:
        if self.replication_policy == "prefix":
            return PrefixPolicy(self.replication_separator)
        return IdentityPolicy() if self.rename == "{topic}" else RenamePolicy(self.rename)

    @property
    def source_cluster_alias(self) -> str:
        return self.source_alias or alias_of(self.source.bootstrap[0])

    @property
    def destination_cluster_alias(self) -> str:
        return self.destination_alias or alias_of(self.destination.bootstrap[0])

    def destination_topic(self, source_topic: str) -> str:
        return self.policy.remote_topic(self.source_cluster_alias, source_topic)

    def selects(self, topic: str) -> bool:
        """Whether the configuration selects a source topic, by its name: never Kafka's internal
        topics (``__*``), nor topics whose name shows they came from the destination (the
        engine also leaves out kmirror's own topics and those whose provenance shows they came
        from the destination: :func:`mirror.engine.topics.selected_topics`)."""
        return (not topic.startswith(_KAFKA_INTERNAL)
                and re.fullmatch(self.topics, topic) is not None
                and (self.exclude is None or re.fullmatch(self.exclude, topic) is None)
                and not is_cycle(self.policy, topic, self.destination_cluster_alias))
