"""The mirror's configuration: one pydantic model, loaded from TOML, overridden from the command line.

Everything is validated before Spark starts, so a typo costs a one-line message naming the
field (``config error: source.bootstrap: ...``) rather than a JVM stack trace minutes later.
See ``docs/configuration.md`` for the reference; the field docs here are its source.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import string
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping

from pydantic import (BaseModel, ConfigDict, Field, FilePath, PlainSerializer, SecretStr, SerializationInfo,
                      ValidationError, field_validator, model_validator)

from kcodecs import KMirrorError

from .kafka.security import SaslCredentials, Security, TlsSettings
from .replication import IdentityPolicy, PrefixPolicy, RenamePolicy, ReplicationPolicy, alias_of, is_cycle
from .routing.policy import DEFAULT_COALESCE_BELOW_BYTES, DEFAULT_COALESCE_TARGET_BYTES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = ["ClusterConfig", "TlsConfig", "SaslConfig", "RetryConfig", "MirrorConfig", "ConfigError", "load_config",
           "ONCE_MAX_OUTAGE_S", "FETCH_MAX_BYTES", "REVEAL_SECRETS", "DEFAULT_CONFIG_EXCLUDE"]

ONCE_MAX_OUTAGE_S = 300.0
"""``max_outage_s`` under ``once``: a one-shot copy (a cron job, a backfill) should end, not hang."""

FETCH_MAX_BYTES = 4 * 1024 * 1024
"""Default ``fetch_max_bytes``: 1 MiB a partition for a task of four, Kafka's consumer default
(``max.partition.fetch.bytes``). A copy's first fetch buffers are fresh pages, each faulted in,
so a larger fetch costs more faults; 8 MiB gained no speed at any batch size (figures:
docs/performance.md, "Fetch size")."""

_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]{1,249}")
"""Kafka's legal topic names (``Topic.validate``)."""
_ALIAS = re.compile(r"[a-zA-Z0-9_-]{1,100}")
_KAFKA_INTERNAL = "__"
"""Kafka's internal topics (``__consumer_offsets``, ``__transaction_state``); kmirror's own are
left out by the engine, which names them (:mod:`mirror.engine.own_topics`)."""

DEFAULT_CONFIG_EXCLUDE = (
    r"follower\.replication\.throttled\.replicas",
    r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\.difference\.max\.ms",
    r"message\.timestamp\.before\.max\.ms",
    r"message\.timestamp\.after\.max\.ms",
    r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
)
"""Topic configs never synced to the destination: MirrorMaker 2's list
(``DefaultConfigPropertyFilter.CONFIG_PROPERTIES_EXCLUDE_DEFAULT``) with two differences.
``message.timestamp.type`` is synced: a LogAppendTime source must stay LogAppendTime at the
destination, or the forwarded broker times (KIP-32) would change meaning. The two limits that
replaced ``message.timestamp.difference.max.ms`` in Kafka 3.6 (KIP-937) are excluded with it.
Why each entry, in docs/configuration.md ("Topic config sync")."""


def _compiles(pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {pattern!r}: {exc}") from None


class ConfigError(KMirrorError):
    """Invalid configuration; the message names every bad field and why."""


def _cli(section: str, metavar: str | None = None) -> dict[str, str]:
    """A field's place on the command line (:mod:`mirror.options` makes its flag): the section
    of ``--help`` it is listed in, and the placeholder for its value where its type does not
    say (a number is N, SECONDS or MS by its unit, a choice lists its values)."""
    return {"section": section, **({"metavar": metavar} if metavar else {})}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


REVEAL_SECRETS = {"reveal_secrets": True}
"""Serialization context under which :data:`Secret` fields are written in clear: only for the
copy of the configuration the job hands its own reader in a private file."""


def _reveal_when_asked(value: SecretStr, info: SerializationInfo) -> str | SecretStr:
    return value.get_secret_value() if (info.context or {}).get("reveal_secrets") else value


Secret = Annotated[SecretStr, PlainSerializer(_reveal_when_asked, when_used="json")]
"""A password: masked in ``repr``, ``str``, logs and JSON, unless dumped with :data:`REVEAL_SECRETS`."""


def _secret_from_env(data: Any, field: str) -> Any:
    """Fill ``field`` from the environment variable named by ``<field>_env``, when the
    configuration is loaded (on the driver; the executors get the value with the config)."""
    if not isinstance(data, dict) or data.get(f"{field}_env") is None:
        return data
    data = dict(data)
    name = data.pop(f"{field}_env")
    if data.get(field) is not None:
        raise ValueError(f"give {field} or {field}_env, not both")
    if name not in os.environ:
        raise ValueError(f"environment variable {name} ({field}_env) is not set")
    data[field] = os.environ[name]
    return data


class TlsConfig(_Strict):
    """TLS to the cluster's brokers, for ``security_protocol`` SSL and SASL_SSL (Kafka's ``ssl.*``)."""

    ca_file: FilePath | None = Field(
        None, description="PEM file of the CA certificates that sign the brokers' certificates (default: the "
        "system's trust store)", json_schema_extra=_cli("security", "FILE"))
    cert_file: FilePath | None = Field(
        None, description="PEM file of our certificate, for brokers that require client certificates (mTLS); "
        "may hold the key too", json_schema_extra=_cli("security", "FILE"))
    key_file: FilePath | None = Field(None, description="PEM file of the certificate's private key, if not in cert_file",
                                      json_schema_extra=_cli("security", "FILE"))
    key_password: Secret | None = Field(None, description="password of an encrypted private key",
                                        json_schema_extra=_cli("security"))
    key_password_env: str | None = Field(None, description="environment variable holding key_password",
                                         json_schema_extra=_cli("security", "VAR"))
    check_hostname: bool = Field(True, description="the broker's certificate must name the host connected to",
                                 json_schema_extra=_cli("security"))

    @model_validator(mode="before")
    @classmethod
    def _key_password_from_env(cls, data: Any) -> Any:
        return _secret_from_env(data, "key_password")

    @model_validator(mode="after")
    def _key_needs_cert(self) -> "TlsConfig":
        if self.key_file is not None and self.cert_file is None:
            raise ValueError("key_file is set without cert_file")
        return self

    def settings(self) -> TlsSettings:
        return TlsSettings(self.ca_file, self.cert_file, self.key_file, self.key_password, self.check_hostname)


class SaslConfig(_Strict):
    """SASL authentication, for ``security_protocol`` SASL_PLAINTEXT and SASL_SSL."""

    mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = Field(description="Kafka's sasl.mechanism",
                                                                          json_schema_extra=_cli("security"))
    username: str = Field(min_length=1, description="SASL user name", json_schema_extra=_cli("security", "USER"))
    password: Secret | None = Field(None, description="the password, in the file (see password_env)",
                                    json_schema_extra=_cli("security"))
    password_env: str | None = Field(
        None, description="name of the environment variable holding the password, read when the configuration "
        "is loaded", json_schema_extra=_cli("security", "VAR"))

    @model_validator(mode="before")
    @classmethod
    def _password_from_env(cls, data: Any) -> Any:
        return _secret_from_env(data, "password")

    @model_validator(mode="after")
    def _has_password(self) -> "SaslConfig":
        if self.password is None:
            raise ValueError("password or password_env is required")
        return self


class ClusterConfig(_Strict):
    """How to reach one Kafka cluster."""

    bootstrap: tuple[str, ...] = Field(min_length=1, description="HOST:PORT addresses, any broker of the cluster",
                                       json_schema_extra=_cli("clusters", "HOST:PORT[,...]"))
    client_id: str = Field("kmirror", min_length=1, description="client.id sent with every request",
                           json_schema_extra=_cli("clusters", "ID"))
    request_timeout_s: float = Field(30.0, gt=0, description="socket timeout per request",
                                     json_schema_extra=_cli("limits"))
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="Kafka's security.protocol: TLS for SSL and SASL_SSL, SASL authentication for "
        "SASL_PLAINTEXT and SASL_SSL", json_schema_extra=_cli("security"))
    tls: TlsConfig | None = Field(None, description="TLS files ([source.tls]); SSL and SASL_SSL only",
                                  json_schema_extra=_cli("security"))
    sasl: SaslConfig | None = Field(None, description="SASL credentials ([source.sasl]); required by SASL_*",
                                    json_schema_extra=_cli("security"))

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


class RetryConfig(_Strict):
    """Bounded exponential backoff for retriable failures (connection errors, leader changes, timeouts)."""

    attempts: int = Field(8, ge=1, description="tries per request before giving up", json_schema_extra=_cli("limits"))
    initial_backoff_s: float = Field(0.1, gt=0, description="first wait; doubles each retry",
                                     json_schema_extra=_cli("limits"))
    max_backoff_s: float = Field(5.0, gt=0, description="cap on a single wait", json_schema_extra=_cli("limits"))


class MirrorConfig(_Strict):
    """One mirror job: which topics go where, how they are partitioned, and how Spark drives it."""

    source: ClusterConfig = Field(json_schema_extra=_cli("clusters", "HOST:PORT[,...]"))
    destination: ClusterConfig = Field(json_schema_extra=_cli("clusters", "HOST:PORT[,...]"))
    topics: str = Field(description="regular expression; source topics whose whole name matches are mirrored",
                        json_schema_extra=_cli("clusters", "REGEX"))
    exclude: str | None = Field(None, description="regular expression; matching topics are left out",
                                json_schema_extra=_cli("clusters", "REGEX"))
    rename: str = Field("{topic}", description="destination topic name, a format string over {topic} (for names "
                        "neither replication policy gives)", json_schema_extra=_cli("clusters", "FORMAT"))
    replication_policy: Literal["identity", "prefix"] = Field(
        "identity", description="how destination topics are named, as MirrorMaker 2's policies: identity, the "
        "source's name (IdentityReplicationPolicy); prefix, '<source alias>.<name>' (DefaultReplicationPolicy). "
        "Either way a topic mirrored from the destination is never mirrored back to it",
            json_schema_extra=_cli("clusters"))
    source_alias: str | None = Field(
        None, description="the source cluster's name in prefixed topic names (default: derived from its first "
        "bootstrap address, e.g. 127-0-0-1-9092)", json_schema_extra=_cli("clusters", "NAME"))
    destination_alias: str | None = Field(
        None, description="the destination cluster's name: prefixed source topics that came from it are never "
        "mirrored back (default: derived from its first bootstrap address)", json_schema_extra=_cli("clusters", "NAME"))
    sync_topic_configs: bool = Field(
        True, description="keep destination topic configs equal to the source's (MirrorMaker 2's "
        "sync.topic.configs.enabled): at creation, then every sync_topic_configs_interval_s",
            json_schema_extra=_cli("sync"))
    sync_topic_configs_interval_s: float = Field(
        600.0, gt=0, description="how often topic configs (and ACLs) are synced (MirrorMaker 2's "
        "sync.topic.configs.interval.seconds)", json_schema_extra=_cli("sync"))
    config_properties_exclude: tuple[str, ...] = Field(
        DEFAULT_CONFIG_EXCLUDE, description="regular expressions of topic config names never synced (MirrorMaker "
        "2's config.properties.exclude; default: MirrorMaker 2's list without message.timestamp.type, see "
        "docs/configuration.md)", json_schema_extra=_cli("sync", "REGEX[,...]"))
    sync_topic_acls: bool = Field(
        True, description="copy topic ACLs to the destination, WRITE left out and ALL made READ (MirrorMaker 2's "
        "sync.topic.acls.enabled); skipped quietly where a cluster has no authorizer", json_schema_extra=_cli("sync"))
    sync_existing_topics: bool = Field(
        False, description="also sync the configs and ACLs of destination topics that were there before kmirror "
        "(by default a topic kmirror did not create is left as its owner shaped it; its partitions are never "
        "changed either way)", json_schema_extra=_cli("sync"))
    partitioning: Literal["auto", "by-key", "preserve"] = Field(
        "auto", description="auto: decided once per topic pair, when the job first sees it, and remembered at the "
        "destination: preserve where the destination topic has as many partitions as the source (as MirrorMaker 2 "
        "does), by-key where the counts differ; by-key: murmur2(key) mod destination partitions, like Kafka's "
        "default partitioner; preserve: destination partition = source partition (a destination topic kmirror "
        "created gets the partitions its source adds)", json_schema_extra=_cli("routing"))
    compression: Literal["source", "none", "gzip", "snappy", "lz4", "zstd"] = Field(
        "source", description="codec of the destination batches; anything but 'source' rebuilds batches in another codec",
            json_schema_extra=_cli("routing"))
    coalesce_below_bytes: int = Field(
        DEFAULT_COALESCE_BELOW_BYTES, ge=0, description="source batches smaller than this are merged with the small "
        "batches after them in the same fetch into one destination batch per partition (records, keys, headers and "
        "timestamps kept; recompressed): a consumer-producer mirror re-batches, and one-to-one forwarding of tiny "
        "batches pays every per-batch cost on each; 0 forwards every batch as it is (default 4096: where it was "
        "measured to pay on Apache Kafka, see docs/performance.md)", json_schema_extra=_cli("routing"))
    coalesce_target_bytes: int = Field(
        DEFAULT_COALESCE_TARGET_BYTES, ge=1024, le=1024 * 1024, description="a run of coalesced source batches "
        "stops at this many bytes (compressed, as the source wrote them)", json_schema_extra=_cli("routing"))
    destination_partitions: int | None = Field(
        None, ge=1, description="partitions of created destination topics (default: the source topic's count)",
            json_schema_extra=_cli("routing"))
    replication_factor: int = Field(-1, description="replication factor of created destination topics (-1: broker default)",
                                    json_schema_extra=_cli("routing"))
    starting_offsets: Literal["earliest", "latest"] | int = Field(
        "earliest", description="where a new job (no checkpoint) starts in each source partition: earliest, latest, "
        "or a time (ISO-8601, e.g. 2026-11-23T08:00:00Z, UTC when no zone is given; or milliseconds since the "
        "epoch): the first record stamped at or after it, found with the brokers' time index",
            json_schema_extra=_cli("streaming", "earliest|latest|TIME"))
    delivery: Literal["exactly-once", "at-least-once"] = Field(
        "exactly-once", description="exactly-once: each copy task writes its records and the source offsets they "
        "reach in one destination transaction, so read_committed consumers see every record once, even after "
        "crashes and restarts; at-least-once: no transactions, a micro-batch interrupted by a crash is copied again",
            json_schema_extra=_cli("delivery"))
    name: str | None = Field(
        None, description="the job's name at the destination: its offsets topic kmirror-offsets.<name> and its "
        "transactional ids <name>-<task>; unique per destination cluster (default: kmirror-<hash of the checkpoint "
        "path>, so two jobs never share one by accident)", json_schema_extra=_cli("delivery", "NAME"))
    transaction_timeout_s: float = Field(
        60.0, gt=0, le=900, description="exactly-once: a copy task's transaction left open longer (a dead task) is "
        "aborted by the destination (Kafka's transaction.timeout.ms; brokers cap it at 15 minutes)",
            json_schema_extra=_cli("delivery"))
    groups: str | None = Field(
        None, description="regular expression; consumer groups whose committed source offsets are translated and "
        "committed to the same group at the destination (MirrorMaker 2's sync.group.offsets), exactly where the "
        "data was forwarded; none by default", json_schema_extra=_cli("sync", "REGEX"))
    sync_group_offsets_interval_s: float = Field(
        60.0, ge=0, description="how often group offsets are translated (MirrorMaker 2's "
        "sync.group.offsets.interval.seconds); --once translates once more at the end", json_schema_extra=_cli("sync"))
    on_data_loss: Literal["fail", "skip-to-earliest"] = Field(
        "fail", description="when source data was deleted before it was copied: stop, or warn, count and go on",
            json_schema_extra=_cli("delivery"))
    checkpoint: Path = Field(Path("kmirror-checkpoint"), description="Spark checkpoint directory (the mirror's offsets)",
                             json_schema_extra=_cli("streaming", "DIR"))
    once: bool = Field(False, description="copy what is there now, then exit (Trigger.AvailableNow)",
                       json_schema_extra=_cli("streaming"))
    trigger_interval_s: float = Field(1.0, ge=0, description="processing-time trigger interval of the long-running job",
                                      json_schema_extra=_cli("streaming"))
    copy_between_micro_batches: bool = Field(
        True, description="long-running job: each copy task hands its ranges to a resident copier that keeps "
        "following its partitions between micro-batches, so records are copied as they arrive, not at the next "
        "trigger (false: each task copies its ranges and ends)", json_schema_extra=_cli("streaming"))
    commit_interval_ms: int = Field(
        20, ge=1, le=60_000, description="a resident copier that has caught up commits its copied records this "
        "often (exactly-once: one destination transaction each; at-least-once: a flush): the most a record waits "
        "for its commit", json_schema_extra=_cli("delivery"))
    lease_s: float = Field(
        30.0, gt=0, description="how long a resident copier goes on without a micro-batch renewing its lease; the "
        "driver renews idle copiers every third of it", json_schema_extra=_cli("streaming"))
    max_outage_s: float | None = Field(
        None, ge=0, description="how long the job waits out an unreachable or leaderless cluster, retrying with "
        "capped exponential backoff, before it fails (default: no limit for the long-running job, "
        f"{ONCE_MAX_OUTAGE_S:g} s with once; inf: no limit)", json_schema_extra=_cli("limits"))
    max_bytes_per_trigger: int | None = Field(None, ge=1, description="approximate cap on source bytes per micro-batch",
                                              json_schema_extra=_cli("streaming"))
    max_records_per_trigger: int | None = Field(None, ge=1, description="cap on source offsets per micro-batch",
                                                json_schema_extra=_cli("streaming"))
    fetch_max_bytes: int = Field(FETCH_MAX_BYTES, ge=1024,
                                 description="bytes asked for per fetch request, each partition up to an equal share; "
                                 "a task fetches again only while less than this waits for the destination",
                                     json_schema_extra=_cli("limits"))
    max_buffer_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="per copy task: bytes of fetch buffers and rebuilt batches not yet "
        "acknowledged by the destination, at most; a slow destination slows fetching instead of growing memory",
            json_schema_extra=_cli("limits"))
    max_in_flight: int = Field(5, ge=1, le=5, description="produce requests in flight per destination broker "
                               "connection (the idempotent producer keeps order with up to 5, as Kafka's)",
                                   json_schema_extra=_cli("limits"))
    copy_tasks: int | None = Field(
        None, ge=1, description="Spark tasks per micro-batch, each copying a group of partitions that share a "
        "source leader (default: Spark's default parallelism, the executor slots)", json_schema_extra=_cli("streaming"))
    master: str = Field("local[2]", min_length=1, description="Spark master URL",
                        json_schema_extra=_cli("streaming", "URL"))
    metrics_port: int | None = Field(
        None, ge=1, le=65535, description="serve Prometheus metrics from the driver on this port (none by default; "
        "see docs/metrics.md)", json_schema_extra=_cli("streaming", "PORT"))
    spark_conf: dict[str, str] = Field(default_factory=dict, description="extra Spark settings, e.g. spark.executor.memory",
                                       json_schema_extra=_cli("streaming", "KEY=VALUE"))
    retry: RetryConfig = Field(default_factory=RetryConfig, json_schema_extra=_cli("limits"))

    @field_validator("topics", "exclude", "groups")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            _compiles(value)
        return value

    @field_validator("config_properties_exclude", mode="before")
    @classmethod
    def _regexes(cls, value: Any) -> Any:
        if isinstance(value, str):  # a flag: comma-separated, as MirrorMaker 2's list configs
            value = tuple(v.strip() for v in value.split(",") if v.strip())
        for pattern in value:
            _compiles(pattern)
        return value

    @field_validator("source_alias", "destination_alias")
    @classmethod
    def _alias(cls, value: str | None) -> str | None:
        # It becomes a topic name's prefix, before the separator it must not contain.
        if value is not None and not _ALIAS.fullmatch(value):
            raise ValueError(f"{value!r} must be letters, digits, '_' or '-' (it starts topic names, before a '.')")
        return value

    @field_validator("starting_offsets", mode="before")
    @classmethod
    def _starting_time(cls, value: Any) -> Any:
        if not isinstance(value, str) or value in ("earliest", "latest"):
            return value
        if value.strip().isdigit():
            return int(value)
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"expected earliest, latest, an ISO-8601 time or milliseconds since the epoch, "
                             f"got {value!r}") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return int(moment.timestamp() * 1000)

    @field_validator("starting_offsets")
    @classmethod
    def _not_negative(cls, value: Any) -> Any:
        if isinstance(value, int) and value < 0:
            raise ValueError(f"a starting time must not be before 1970, got {value} ms")
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        # It becomes part of a topic name (kmirror-offsets.<name>, at most 249 characters).
        if value is not None and not _TOPIC_CHARS.fullmatch("kmirror-offsets." + value):
            raise ValueError(f"{value!r} must be letters, digits, '.', '_' or '-' (it names a topic)")
        return value

    @field_validator("rename")
    @classmethod
    def _rename(cls, value: str) -> str:
        fields = {name for _, name, _, _ in string.Formatter().parse(value) if name is not None}
        if fields != {"topic"}:
            raise ValueError(f"must use {{topic}} and no other field, got {value!r}")
        if not _TOPIC_CHARS.fullmatch(value.format(topic="t")):
            raise ValueError(f"{value!r} does not make a legal Kafka topic name (letters, digits, '.', '_', '-')")
        return value

    @model_validator(mode="after")
    def _buffer_holds_a_fetch(self) -> "MirrorConfig":
        if self.max_buffer_bytes < self.fetch_max_bytes:
            raise ValueError(f"max_buffer_bytes ({self.max_buffer_bytes}) must hold at least one fetch "
                             f"(fetch_max_bytes, {self.fetch_max_bytes})")
        return self

    @model_validator(mode="after")
    def _one_naming(self) -> "MirrorConfig":
        if self.replication_policy != "identity" and self.rename != "{topic}":
            raise ValueError(f"rename {self.rename!r} and replication_policy {self.replication_policy!r} both name "
                             "destination topics: choose one")
        return self

    @model_validator(mode="after")
    def _no_loop(self) -> "MirrorConfig":
        if set(self.source.bootstrap) & set(self.destination.bootstrap) and self.rename == "{topic}":
            raise ValueError("source and destination share a broker and rename is '{topic}': "
                             "the mirror would copy topics onto themselves; set rename, e.g. 'mirror.{topic}'")
        return self

    @property
    def job_name(self) -> str:
        """``name``, or one derived from the checkpoint: the checkpoint is what identifies a
        streaming query, so the same checkpoint keeps the same offsets topic and transactional ids."""
        if self.name is not None:
            return self.name
        return "kmirror-" + hashlib.sha1(str(self.checkpoint.absolute()).encode()).hexdigest()[:10]

    @property
    def outage_limit_s(self) -> float:
        """``max_outage_s``, or its default for the run mode: a long-running mirror waits as long
        as an outage lasts (as MirrorMaker 2's tasks do), a ``once`` run gives up."""
        if self.max_outage_s is not None:
            return self.max_outage_s
        return ONCE_MAX_OUTAGE_S if self.once else math.inf

    @property
    def policy(self) -> ReplicationPolicy:
        if self.replication_policy == "prefix":
            return PrefixPolicy()
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


def load_config(path: Path | None = None, overrides: Mapping[str, Any] | None = None) -> MirrorConfig:
    """Read ``path`` (TOML), apply ``overrides`` (dotted keys; None means "not given"), validate.

    A table given as an override (``--spark-conf`` flags) adds to the file's table of that
    name, its keys winning, rather than replacing it.

    Raises :class:`ConfigError` with one line per problem.
    """
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text())
        except OSError as exc:
            raise ConfigError(f"config error: cannot read {path}: {exc.strerror or exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config error: {path} is not valid TOML: {exc}") from exc
    for dotted, value in (overrides or {}).items():
        if value is not None:
            *parents, leaf = dotted.split(".")
            node = data
            for parent in parents:
                node = node.setdefault(parent, {})
                if not isinstance(node, dict):
                    raise ConfigError(f"config error: {parent}: expected a table")
            if isinstance(value, dict) and isinstance(node.get(leaf), dict):
                value = {**node[leaf], **value}
            node[leaf] = value
    try:
        return MirrorConfig.model_validate(data)
    except ValidationError as exc:
        lines = [f"{'.'.join(map(str, err['loc'])) or '(top level)'}: {err['msg']}" for err in exc.errors()]
        source = f" in {path}" if path else ""
        raise ConfigError(f"config error{source}:\n  " + "\n  ".join(lines)) from None
