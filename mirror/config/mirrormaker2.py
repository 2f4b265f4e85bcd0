"""MirrorMaker 2's dedicated-mode ``mm2.properties`` read as one kmirror job
(``kmirror run --mirrormaker2-config mm2.properties [--flow A->B]``).

MM2 runs every flow ``A->B`` its file enables; kmirror runs one. :func:`read_mirrormaker2`
picks the flow and gives its settings as kmirror's dotted keys, the bottom layer of
:func:`~mirror.config.load_config` (``base=``), and accounts for every key of the file:

- mapped: it has a kmirror key, in :attr:`Mm2Mapping.settings`;
- ignored: it means nothing to kmirror (MM2's or Connect's internals, another flow), and why;
- unsupported: it asks for what kmirror cannot do (a custom policy, a JKS keystore, a typo
  that MM2 would have ignored as silently), and why; the job must not start.

Values are looked up as ``MirrorMakerConfig`` does. A connector setting ``x`` of the flow is
``A->B.x``, else the top-level ``x`` (``connectorBaseConfig``). A cluster's client setting
(``bootstrap.servers``, ``security.protocol``, ``ssl.*``, ``sasl.*``) is ``A.x``, else the
top-level ``x`` (``clusterProps``). The Connect worker that ran the flow was configured from
``B.*`` (its target) and a few top-level prefixes such as ``offset.storage`` (``workerConfig``):
so MM2 read ``B.exactly.once.source.support`` and ``B.group.id``, never their top-level forms.

MM2's lists of regular expressions (``topics``, ``groups``, their excludes) are joined with
``|`` and matched against whole names with Java's ``Pattern`` (``MirrorUtils.compilePatternList``,
``matches()``). kmirror matches whole names with Python's :func:`re.fullmatch`; Java syntax is
rewritten only where the rewrite means the same (:func:`java_regex`), anything else is
unsupported, so a list never selects other names than MM2's did.

Every key, and what becomes of it, is in docs/configuration.md ("Coming from MirrorMaker 2").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple

import javaproperties
from pydantic import SecretStr

from .base import ConfigError
from .clusters import ALIAS_CHARS, TOPIC_CHARS
from .java_regex import java_regex

__all__ = ["Mm2Key", "Mm2Mapping", "read_mirrormaker2",
           "TOPICS_EXCLUDE_DEFAULT", "GROUPS_EXCLUDE_DEFAULT"]

DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"
TOPICS_EXCLUDE_DEFAULT = r".*[\-\.]internal, .*\.replica, __.*"
"""``DefaultTopicFilter.TOPICS_EXCLUDE_DEFAULT``: set whenever the file gives no exclude, so
kmirror leaves out what MM2 left out (MM2's internal topics among them)."""
INTERNAL_TOPICS = r"__.*|\..*|.*[.-]internal"
"""``ReplicationPolicy.isInternalTopic``: topics MM2 never replicates, whatever ``topics.exclude``
says (``MirrorSourceConnector.shouldReplicateTopic``); with a separator, also ``.*<sep>internal``."""
GROUPS_EXCLUDE_DEFAULT = "console-consumer-.*, connect-.*, __.*"
"""``DefaultGroupFilter.GROUPS_EXCLUDE_DEFAULT``."""
_DEFAULT_PLUGINS = {
    "topic.filter.class": "org.apache.kafka.connect.mirror.DefaultTopicFilter",
    "group.filter.class": "org.apache.kafka.connect.mirror.DefaultGroupFilter",
    "config.property.filter.class": "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter",
    "forwarding.admin.class": "org.apache.kafka.clients.admin.ForwardingAdmin",
}
_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_PROVIDER = re.compile(r"\$\{[^}]*:[^}]*\}")
"""A Kafka config provider reference, ``${file:/etc/secrets.properties:password}``."""


@dataclass(frozen=True)
class Mm2Key:
    key: str
    """The MM2 key as written in the file."""
    reason: str
    """One line: why it is ignored, or cannot be honoured."""


@dataclass(frozen=True)
class Mm2Mapping:
    source: str
    """The source cluster's alias (A of A->B)."""
    target: str
    settings: dict[str, object]
    """kmirror's dotted keys (``clusters.source.bootstrap``, ``takeover.mirrormaker2``, ...);
    secrets are :class:`~pydantic.SecretStr`, so this prints masked. Complete only when
    :attr:`unsupported` is empty."""
    ignored: tuple[Mm2Key, ...]
    """Keys with no meaning for kmirror: listed, and the job still starts."""
    unsupported: tuple[Mm2Key, ...]
    """Keys asking for what kmirror cannot do: listed, and the job must not start."""


# --- reading the file, choosing the flow ---------------------------------------------------

def read_mirrormaker2(path: Path, flow: str | None = None) -> Mm2Mapping:
    """MM2's file at ``path`` as the settings of its flow ``flow`` (``"A->B"``), or of the one
    flow it enables. Raises :class:`ConfigError`, one line, when the file cannot be read, has
    no ``clusters``, names no usable flow, or lacks a bootstrap of the flow's clusters."""
    props = _load(Path(path))
    clusters = _clusters(props, path)
    source, target = _chosen_flow(props, clusters, flow, path)
    ledger = _Ledger(props, clusters, source, target, Path(path))
    for step in _STEPS:
        step(ledger)
    _account_for_the_rest(ledger)
    return ledger.mapping()


def _load(path: Path) -> dict[str, str]:
    """Java's ``Properties.load`` rules (ISO-8859-1, escapes, continuation lines), as MM2
    reads its file (``Utils.loadProps``): a regex written ``\\\\.`` there is ``\\.``."""
    try:
        with path.open("rb") as fp:
            return dict(javaproperties.load(fp))
    except OSError as exc:
        raise ConfigError(f"config error: cannot read {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:  # javaproperties' InvalidUEscapeError
        raise ConfigError(f"config error: {path} is not a Java properties file: {exc}") from exc


def _java_list(value: str) -> list[str]:
    """A ``ConfigDef`` LIST: trimmed, split at commas with the blanks around them."""
    trimmed = value.strip()
    return re.split(r"\s*,\s*", trimmed) if trimmed else []


def _clusters(props: dict[str, str], path: Path) -> list[str]:
    """MM2's aliases, in the file's order; without them the file is not MM2's dedicated mode."""
    aliases = list(dict.fromkeys(_java_list(props.get("clusters", ""))))
    if not aliases:
        raise ConfigError(f"config error: {path} has no 'clusters' (MirrorMaker 2's list of cluster aliases): "
                          "not a MirrorMaker 2 dedicated-mode file")
    return aliases


def _enabled_flows(props: dict[str, str], clusters: list[str]) -> list[tuple[str, str]]:
    """The flows MM2 ran: ``A->B.enabled`` is false unless it reads true
    (``MirrorMakerConfig.clusterPairs``: ``Boolean.parseBoolean``, so ``yes`` is false)."""
    return [(a, b) for a in clusters for b in clusters
            if a != b and props.get(f"{a}->{b}.enabled", "").lower() == "true"]


def _chosen_flow(props: dict[str, str], clusters: list[str], flow: str | None, path: Path) -> tuple[str, str]:
    enabled = _enabled_flows(props, clusters)
    if flow is not None:
        return _named_flow(flow, clusters, enabled, path)
    if not enabled:
        raise ConfigError(f"config error: {path} enables no flow (SOURCE->TARGET.enabled = true): "
                          "MirrorMaker 2 replicated nothing, so there is nothing to take over")
    if len(enabled) > 1:
        names = ", ".join(f"{a}->{b}" for a, b in enabled)
        raise ConfigError(f"config error: {path} enables {len(enabled)} flows ({names}): choose one with --flow")
    return enabled[0]


def _named_flow(flow: str, clusters: list[str], enabled: list[tuple[str, str]], path: Path) -> tuple[str, str]:
    """``--flow``: two listed clusters, a flow MM2 ran (taking over one it did not is a mistake)."""
    source, arrow, target = (part.strip() for part in flow.partition("->"))
    if not arrow or source not in clusters or target not in clusters or source == target:
        raise ConfigError(f"config error: --flow {flow!r} is not SOURCE->TARGET of two clusters of {path} "
                          f"({', '.join(clusters)})")
    if (source, target) not in enabled:
        raise ConfigError(f"config error: --flow {flow}: {path} does not enable it ({source}->{target}.enabled "
                          "= true), so MirrorMaker 2 did not run it")
    return source, target


# --- the ledger: every key's fate --------------------------------------------------------------

class _Found(NamedTuple):
    """A value and the key it was read from, which is what an ignored or unsupported line names."""

    key: str
    value: str


class _Ledger:
    """One flow's view of the file: lookups as MM2 makes them, the settings they give, and
    which keys were used, ignored or unsupported (a key nobody looked at is classified last)."""

    def __init__(self, props: dict[str, str], clusters: list[str], source: str, target: str, path: Path):
        self.props, self.clusters, self.path = props, clusters, path
        self.source, self.target = source, target
        self.settings: dict[str, object] = {}
        self.used: set[str] = {"clusters", f"{source}->{target}.enabled"}
        self.ignored: dict[str, str] = {}
        self.unsupported: dict[str, str] = {}
        self.protocol = {source: "PLAINTEXT", target: "PLAINTEXT"}
        self.internal_separator = "."

    @property
    def flow(self) -> str:
        return f"{self.source}->{self.target}"

    def first(self, *keys: str, needed: bool = True) -> _Found | None:
        """The first of ``keys`` the file gives (all given count as used): MM2's precedence. A
        ``needed`` value that a config provider would give is unsupported: kmirror cannot."""
        present = [key for key in keys if key in self.props]
        self.used.update(present)
        if not present:
            return None
        found = _Found(present[0], self.props[present[0]])
        if needed and _PROVIDER.search(found.value):
            self.reject(found.key, "a ${provider:...} reference: kmirror runs no Kafka config providers; "
                                   "give the value itself")
            return None
        return found

    def connector(self, name: str) -> _Found | None:
        """The flow's connector setting: ``A->B.name``, else ``name``."""
        return self.first(f"{self.flow}.{name}", name)

    def cluster(self, alias: str, name: str, *, needed: bool = True) -> _Found | None:
        """A cluster's client setting: ``alias.name``, else ``name``."""
        return self.first(f"{alias}.{name}", name, needed=needed)

    def worker(self, name: str, *, top_level: bool) -> _Found | None:
        """The flow's Connect worker setting: ``B.name`` (``B`` its target), under a top-level
        ``name`` where MM2 passes that prefix to its workers (``offset.storage``, converters)."""
        return self.first(name, f"{self.target}.{name}") if top_level else self.first(f"{self.target}.{name}")

    def flag(self, found: _Found | None, default: bool) -> bool:
        """A ``ConfigDef`` BOOLEAN: true or false, any case, blanks trimmed."""
        if found is None:
            return default
        word = found.value.strip().lower()
        if word not in ("true", "false"):
            self.reject(found.key, f"{found.value!r} is neither true nor false")
            return default
        return word == "true"

    def number(self, found: _Found | None, default: int | None) -> int | None:
        """A ``ConfigDef`` INT or LONG: decimal digits, blanks trimmed."""
        if found is None:
            return default
        if not re.fullmatch(r"[+-]?\d+", found.value.strip()):
            self.reject(found.key, f"{found.value!r} is not a whole number")
            return default
        return int(found.value.strip())

    def set(self, dotted: str, value: object) -> None:
        self.settings[dotted] = value

    def ignore(self, key: str, reason: str) -> None:
        """``key`` means nothing to kmirror (unless already found unsupported, which stays)."""
        self.used.add(key)
        if key not in self.unsupported:
            self.ignored[key] = reason

    def reject(self, key: str, reason: str) -> None:
        """``key`` asks for what kmirror cannot do: the job must not start."""
        self.used.add(key)
        self.ignored.pop(key, None)
        self.unsupported[key] = reason

    def mapping(self) -> Mm2Mapping:
        """The result, its lists in the file's order (the order a reader checks them in)."""
        def listed(fates: dict[str, str]) -> tuple[Mm2Key, ...]:
            return tuple(Mm2Key(key, fates[key]) for key in self.props if key in fates)
        return Mm2Mapping(self.source, self.target, dict(self.settings), listed(self.ignored),
                          listed(self.unsupported))


# --- the steps, one per family of keys ---------------------------------------------------

def _map_clusters(r: _Ledger) -> None:
    """Bootstrap and alias of each side. The aliases are MM2's, so the takeover finds MM2's
    topics by their default names, and ``prefix`` names topics as MM2 did."""
    for side, alias in (("source", r.source), ("destination", r.target)):
        found = r.cluster(alias, "bootstrap.servers")
        if found is None or not found.value.strip():
            raise ConfigError(f"config error: {r.path}: {alias}.bootstrap.servers is not set (the {side} of "
                              f"{r.flow})")
        r.set(f"clusters.{side}.bootstrap", found.value)
        if ALIAS_CHARS.fullmatch(alias):
            r.set(f"clusters.{side}_alias", alias)
    bad = [alias for alias in (r.source, r.target) if not ALIAS_CHARS.fullmatch(alias)]
    if bad:
        r.reject("clusters", f"the alias {' and '.join(map(repr, bad))}: kmirror's aliases are letters, digits, "
                             "'_' and '-' (an alias starts topic names)")


def _map_topics(r: _Ledger) -> None:
    """``topics`` and ``topics.exclude`` as two whole-name expressions, MM2's defaults where
    the file gives none, and the exclude extended by the internal topics MM2 never replicates
    (after :func:`_map_policy`, which finds the separator of their names)."""
    include = r.connector("topics")
    exclude = _with_deprecated(r, "topics.exclude", "topics.blacklist")
    topics = _regex_of(r, include, ".*")
    r.set("clusters.topics", "(?!)" if topics is None else topics)  # an empty list: MM2 mirrors nothing
    excluded = _regex_of(r, exclude, TOPICS_EXCLUDE_DEFAULT)
    separator = r.internal_separator
    internal = INTERNAL_TOPICS + ("" if separator in (".", "-") else f"|.*{re.escape(separator)}internal")
    r.set("clusters.exclude", internal if excluded is None else f"{excluded}|{internal}")


def _with_deprecated(r: _Ledger, name: str, deprecated: str) -> _Found | None:
    """``name``, else its deprecated alias (``ConfigUtils.translateDeprecatedConfigs``: the new
    name wins when both are given)."""
    found, old = r.connector(name), r.connector(deprecated)
    if found is not None and old is not None:
        r.ignore(old.key, f"{found.key} is given too, and wins (MM2 reads {deprecated} only without it)")
    return found or old


def _regex_of(r: _Ledger, found: _Found | None, default: str) -> str | None:
    """An MM2 list of expressions as one Python expression; None for an empty list (which
    MM2 reads as "no name")."""
    items = _java_list(found.value if found is not None else default)
    if not items:
        return None
    try:
        return java_regex("|".join(items))
    except ValueError as exc:
        r.reject(found.key if found is not None else "clusters", str(exc))
        return None


def _map_policy(r: _Ledger) -> None:
    """``replication.policy.class`` and its separator; also the separator of MM2's internal
    topic names, which the takeover needs (``DefaultReplicationPolicy.internalSeparator``)."""
    found = r.connector("replication.policy.class")
    separator = r.connector("replication.policy.separator")
    internal = r.connector("replication.policy.internal.topic.separator.enabled")
    named = found.value.strip() if found else DEFAULT_POLICY
    policy = {DEFAULT_POLICY: "prefix", IDENTITY_POLICY: "identity"}.get(named)
    if policy is None:
        r.reject(found.key, "a custom ReplicationPolicy: kmirror names topics as DefaultReplicationPolicy (prefix) "
                            "or IdentityReplicationPolicy (identity) only")
        return
    r.set("clusters.replication_policy", policy)
    if separator is None:
        if internal is not None:
            r.ignore(internal.key, "MM2 reads it only beside replication.policy.separator")
        return
    # configure() reads the separator raw and the flag with Boolean.parseBoolean, only beside a separator.
    r.internal_separator = separator.value if internal is None or internal.value.lower() == "true" else "."
    if policy == "prefix" and not TOPIC_CHARS.fullmatch(separator.value):
        r.reject(separator.key, f"{separator.value!r}: kmirror's separator is letters, digits, '.', '_' or '-'")
    elif policy == "prefix":
        r.set("clusters.replication_separator", separator.value)


def _map_topic_sync(r: _Ledger) -> None:
    """Topic configs and ACLs: on by default in both. kmirror syncs them on one interval. MM2
    syncs every topic it replicates into, whoever made it, so ``existing_topics`` is set to
    keep that (kmirror alone leaves a topic it did not create as it found it)."""
    configs = r.flag(r.connector("sync.topic.configs.enabled"), True)
    acls = r.flag(r.connector("sync.topic.acls.enabled"), True)
    configs_every = r.connector("sync.topic.configs.interval.seconds")
    acls_every = r.connector("sync.topic.acls.interval.seconds")
    configs_s, acls_s = r.number(configs_every, 600), r.number(acls_every, 600)
    r.set("sync.topic_configs", configs)
    r.set("sync.topic_acls", acls)
    for on, found, what in ((configs, configs_every, "sync.topic.configs"), (acls, acls_every, "sync.topic.acls")):
        if found is not None and not on:
            r.ignore(found.key, f"{what}.enabled is false")
    if configs and acls and acls_every is not None and acls_s != configs_s:
        r.reject(acls_every.key, f"ACLs every {acls_s} s and configs every {configs_s} s: kmirror syncs both on "
                                 "one interval (sync.topic_configs_interval_s)")
    if configs or acls:
        r.set("sync.topic_configs_interval_s", float(configs_s if configs else acls_s))
        r.set("sync.existing_topics", True)
    _map_config_exclude(r)


def _map_config_exclude(r: _Ledger) -> None:
    """``config.properties.exclude``, each expression on its own (kmirror's is a list). Absent,
    kmirror's default stays: MM2's list, but ``message.timestamp.type`` synced (see
    ``DEFAULT_CONFIG_EXCLUDE``)."""
    found = _with_deprecated(r, "config.properties.exclude", "config.properties.blacklist")
    if found is None:
        return
    try:
        r.set("sync.config_properties_exclude", tuple(java_regex(item) for item in _java_list(found.value)))
    except ValueError as exc:
        r.reject(found.key, str(exc))


def _map_groups(r: _Ledger) -> None:
    """``sync.group.offsets`` (off by default): its groups as one expression that matches an
    included name no exclude matches (``DefaultGroupFilter.shouldReplicateGroup``)."""
    on = r.flag(r.connector("sync.group.offsets.enabled"), False)
    every = r.connector("sync.group.offsets.interval.seconds")
    include = r.connector("groups")
    exclude = _with_deprecated(r, "groups.exclude", "groups.blacklist")
    if not on:
        for found in (every, include, exclude):
            if found is not None:
                r.ignore(found.key, "sync.group.offsets.enabled is false: MM2 committed no group offsets "
                                    "(kmirror groups translate does, on demand)")
        return
    groups = _regex_of(r, include, ".*")
    excluded = _regex_of(r, exclude, GROUPS_EXCLUDE_DEFAULT)
    if groups is not None:
        r.set("sync.groups", groups if excluded is None else f"(?!(?:{excluded})\\Z)(?:{groups})")
    r.set("sync.group_offsets_interval_s", float(r.number(every, 60)))


def _map_routing(r: _Ledger) -> None:
    """Created topics' replication factor, the copy's parallelism, the destination codec."""
    factor = r.connector("replication.factor")
    if factor is not None:
        r.set("routing.replication_factor", r.number(factor, -1))
    tasks = r.connector("tasks.max")
    if tasks is not None:
        r.set("streaming.copy_tasks", r.number(tasks, None))
    # The records' producer is the worker's, configured from B.producer.* (workerConfig).
    codec = r.first(f"{r.target}.producer.compression.type")
    if codec is not None and codec.value.strip().lower() in _CODECS:
        r.set("routing.compression", codec.value.strip().lower())
    elif codec is not None:
        r.reject(codec.key, f"{codec.value!r}: kmirror writes none, gzip, snappy, lz4 or zstd")


def _map_converters(r: _Ledger) -> None:
    """MM2 copies bytes with ByteArrayConverter, its default; another converter re-encoded
    records, which kmirror does not. A connector's own converter wins over the worker's."""
    for name in ("key.converter", "value.converter", "header.converter"):
        found = r.first(f"{r.flow}.{name}", name, f"{r.target}.{name}")
        if found is None:
            continue
        if found.value.strip() == BYTE_ARRAY_CONVERTER:
            r.ignore(found.key, "ByteArrayConverter, MM2's default: records copied as bytes, as kmirror copies them")
        else:
            r.reject(found.key, f"MM2 re-encoded records with {found.value.strip()}; kmirror copies bytes unchanged")


def _map_plugins(r: _Ledger) -> None:
    """MM2's pluggable filters: the defaults are what this mapping follows; others are code."""
    for name, default in _DEFAULT_PLUGINS.items():
        found = r.connector(name)
        if found is not None and found.value.strip() == default:
            r.ignore(found.key, "MM2's default, which this mapping follows")
        elif found is not None:
            r.reject(found.key, f"a custom {name.split('.')[0]} class: kmirror selects with regular expressions only")


def _map_takeover(r: _Ledger) -> None:
    """Where MM2 kept its state, for the takeover: each name only where it differs from what
    :class:`~mirror.config.MirrorConfig` derives from the aliases (``mm2_offsets_topic``...).
    The offset syncs' name takes the internal separator (``DefaultReplicationPolicy.offsetSyncsTopic``)."""
    a, b, sep = r.source, r.target, r.internal_separator
    r.set("takeover.mirrormaker2", True)
    offsets = r.worker("offset.storage.topic", top_level=True)
    if offsets is not None and offsets.value.strip() != f"mm2-offsets.{a}.internal":
        r.set("takeover.offsets_topic", offsets.value.strip())
    group = r.worker("group.id", top_level=False)
    if group is not None and group.value.strip() != f"{a}-mm2":
        r.set("takeover.connect_group", group.value.strip())
    location = r.connector("offset-syncs.topic.location")
    where = "source" if location is None else location.value.strip()
    if where not in ("source", "target"):
        r.reject(location.key, f"{location.value!r} is neither source nor target")
        return
    r.set("takeover.offset_syncs_location", "source" if where == "source" else "destination")
    # MirrorSourceConfig.offsetSyncsTopic: named after the cluster it is not on.
    syncs = f"mm2-offset-syncs{sep}{b if where == 'source' else a}{sep}internal"
    if syncs != f"mm2-offset-syncs.{b}.internal":
        r.set("takeover.offset_syncs_topic", syncs)


def _map_delivery(r: _Ledger) -> None:
    """MM2's promise kept: exactly-once where its worker for B ran exactly-once source support
    (KIP-618), at-least-once otherwise, even though kmirror could do better: a consumer that
    relied on at-least-once is not switched to transactions behind its back."""
    found = r.worker("exactly.once.source.support", top_level=False)
    mode = "disabled" if found is None else found.value.strip().lower()
    if mode not in ("enabled", "preparing", "disabled"):
        r.reject(found.key, f"{found.value!r} is none of enabled, preparing, disabled")
        return
    r.set("delivery.mode", "exactly-once" if mode == "enabled" else "at-least-once")
    r.set("takeover.exactly_once", mode == "enabled")


def _map_security(r: _Ledger) -> None:
    """Each cluster's own connection: kmirror has one per cluster, where MM2 has one per client."""
    for side, alias in (("source", r.source), ("destination", r.target)):
        _map_cluster_security(r, side, alias)


def _map_cluster_security(r: _Ledger, side: str, alias: str) -> None:
    """``security.protocol`` and what it uses: TLS files for *SSL, credentials for SASL_*."""
    found = r.cluster(alias, "security.protocol")
    protocol = "PLAINTEXT" if found is None else found.value.strip().upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        r.reject(found.key, f"{found.value!r} is not a Kafka security protocol")
        return
    r.protocol[alias] = protocol
    r.set(f"clusters.{side}.security_protocol", protocol)
    if protocol.endswith("SSL"):
        _map_tls(r, f"clusters.{side}.tls", alias)
    if protocol.startswith("SASL_"):
        _map_sasl(r, f"clusters.{side}.sasl", alias, found)


_SSL_UNSUPPORTED = {
    "ssl.cipher.suites": "kmirror cannot restrict TLS to a list of Java cipher suite names",
    "ssl.engine.factory.class": "a custom Java TLS engine",
    "ssl.truststore.certificates": "certificates inline: kmirror reads PEM files; write them to one (ca_file)",
    "ssl.keystore.key": "a key inline: kmirror reads PEM files; write key and chain to one (cert_file)",
    "ssl.keystore.certificate.chain": "a chain inline: kmirror reads PEM files; write key and chain to one (cert_file)",
}
_PEM_ONLY = "kmirror reads PEM files; convert with keytool -exportcert/openssl"


def _map_tls(r: _Ledger, table: str, alias: str) -> None:
    """Kafka's ``ssl.*`` where kmirror has the same thing: PEM files, the key's password and
    the host name check. JKS and PKCS12 stores (Java's default type is JKS) are Java's."""
    trust, trust_type = r.cluster(alias, "ssl.truststore.location"), _store_type(r, alias, "truststore")
    keys, key_type = r.cluster(alias, "ssl.keystore.location"), _store_type(r, alias, "keystore")
    for found, kind, field in ((trust, trust_type, "ca_file"), (keys, key_type, "cert_file")):
        if found is not None and kind == "PEM":
            r.set(f"{table}.{field}", found.value.strip())
        elif found is not None:
            r.reject(found.key, f"a {kind} store: {_PEM_ONLY}")
    pem_key = keys is not None and key_type == "PEM"
    key_password = r.cluster(alias, "ssl.key.password", needed=pem_key)
    if key_password is not None and pem_key:
        r.set(f"{table}.key_password", SecretStr(key_password.value))
    elif key_password is not None:
        r.ignore(key_password.key, "the key of a keystore kmirror does not read")
    for name in ("ssl.truststore.password", "ssl.keystore.password"):
        if (found := r.cluster(alias, name, needed=False)) is not None:
            r.ignore(found.key, "a Java store's password; kmirror reads PEM files, whose key has ssl.key.password")
    check = r.cluster(alias, "ssl.endpoint.identification.algorithm")
    if check is not None and check.value.strip() == "":
        r.set(f"{table}.check_hostname", False)
    elif check is not None and check.value.strip().lower() != "https":
        r.reject(check.key, f"{check.value!r}: kmirror checks host names (https) or not (empty)")
    for name, reason in _SSL_UNSUPPORTED.items():
        if (found := r.cluster(alias, name)) is not None:
            r.reject(found.key, reason)


def _store_type(r: _Ledger, alias: str, store: str) -> str:
    """``ssl.<store>.type``, Java's default JKS when absent."""
    found = r.cluster(alias, f"ssl.{store}.type")
    return "JKS" if found is None else found.value.strip().upper()


_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_SASL_UNSUPPORTED = {
    "sasl.client.callback.handler.class": "a custom Java callback handler",
    "sasl.login.callback.handler.class": "a custom Java callback handler",
    "sasl.login.class": "a custom Java login",
}


def _map_sasl(r: _Ledger, table: str, alias: str, protocol: _Found) -> None:
    """``sasl.mechanism`` (Kafka's default is GSSAPI) and the user name and password of its
    ``sasl.jaas.config``: PLAIN and SCRAM, the mechanisms kmirror speaks."""
    found, jaas = r.cluster(alias, "sasl.mechanism"), r.cluster(alias, "sasl.jaas.config")
    for name, reason in _SASL_UNSUPPORTED.items():
        if (other := r.cluster(alias, name)) is not None:
            r.reject(other.key, reason)
    mechanism = "GSSAPI" if found is None else found.value.strip()
    if mechanism not in _LOGIN_MODULES:
        r.reject(found.key if found else protocol.key, f"SASL mechanism {mechanism}"
                 f"{'' if found else ' (Kafka default)'}: kmirror speaks PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512")
        return
    if jaas is None:
        r.reject(protocol.key, f"{alias}: SASL without sasl.jaas.config, where kmirror reads the user and password")
        return
    login = _jaas_login(r, jaas, _LOGIN_MODULES[mechanism])
    if login is not None:
        r.set(f"{table}.mechanism", mechanism)
        r.set(f"{table}.username", login[0])
        r.set(f"{table}.password", SecretStr(login[1]))


_JAAS = re.compile(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)(?:\s+(.*?))?\s*;\s*", re.DOTALL)
_JAAS_OPTION = re.compile(r'\s*([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')


def _jaas_login(r: _Ledger, found: _Found, module: str) -> tuple[str, str] | None:
    """``username`` and ``password`` of one login module, as Kafka's ``JaasConfig`` parses
    it (quoted values with backslash escapes); any other option is a feature kmirror lacks."""
    match = _JAAS.fullmatch(found.value)
    if match is None or match.group(1) != module:
        r.reject(found.key, f"not one '{module} required username=... password=...;' entry, where kmirror reads "
                            "the user and password of this mechanism")
        return None
    options, rest = {}, match.group(3) or ""
    while rest.strip():
        option = _JAAS_OPTION.match(rest)
        if option is None:
            r.reject(found.key, f"cannot read the options {rest.strip()[:20]!r}...")
            return None
        quoted = option.group(2)
        options[option.group(1)] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else option.group(3)
        rest = rest[option.end():]
    others = sorted(set(options) - {"username", "password"})
    if others or not {"username", "password"} <= set(options):
        r.reject(found.key, f"kmirror needs username and password, and no other option (got {sorted(options)})")
        return None
    return options["username"], options["password"]


_STEPS: tuple[Callable[[_Ledger], None], ...] = (
    _map_clusters, _map_policy, _map_topics, _map_topic_sync, _map_groups, _map_routing, _map_converters,
    _map_plugins, _map_takeover, _map_delivery, _map_security)


# --- every other key -----------------------------------------------------------------------

_CHECKPOINTS = ("kmirror writes no checkpoints topic: it translates group offsets exactly, on demand (kmirror "
                "groups translate) or continuously ([sync] groups)")
_HEARTBEATS = "kmirror emits no heartbeats: its metrics give lag and replication latency (--metrics-port)"
_OFFSET_SYNCS = "MM2's offset syncs; kmirror records its own (kmirror-offset-syncs.*)"
_CONNECT = "an internal topic of MM2's Connect worker, which kmirror does not use"
_REST = "MM2's REST server between its nodes; kmirror has none (Spark runs its tasks)"
_CLIENT = "a setting of MM2's own Kafka client; kmirror's clients are its own (see [limits])"
_METRICS = "MM2's JMX metrics; kmirror's are Prometheus metrics (--metrics-port)"
_PROVIDERS = "kmirror runs no Kafka config providers; a value that uses one is unsupported"
_CONVERTER = "a setting of a converter kmirror does not run"
_IGNORED = {
    "emit.checkpoints.enabled": _CHECKPOINTS,
    "emit.checkpoints.interval.seconds": _CHECKPOINTS,
    "emit.heartbeats.enabled": _HEARTBEATS,
    "emit.heartbeats.interval.seconds": _HEARTBEATS,
    "heartbeats.topic.replication.factor": _HEARTBEATS,
    "default.replication.policy.heartbeats.topic.name": _HEARTBEATS,
    "checkpoints.topic.replication.factor": "MM2's checkpoints topic, which kmirror does not write",
    "offset-syncs.topic.replication.factor": _OFFSET_SYNCS,
    "emit.offset-syncs.enabled": _OFFSET_SYNCS,
    "offset.lag.max": _OFFSET_SYNCS,
    "refresh.topics.enabled": "kmirror picks up new matching topics while it runs",
    "refresh.topics.interval.seconds": "kmirror picks up new matching topics while it runs",
    "refresh.groups.enabled": "kmirror lists the source's groups at every group offset sync",
    "refresh.groups.interval.seconds": "kmirror lists the source's groups at every group offset sync",
    "consumer.poll.timeout.ms": _CLIENT,
    "admin.timeout.ms": _CLIENT,
    "use.incremental.alter.configs": "kmirror always syncs configs with IncrementalAlterConfigs",
    "add.source.alias.to.metrics": _METRICS,
    "metric.reporters": _METRICS,
    "dedicated.mode.enable.internal.rest": _REST,
    "listeners": _REST,
    "rest.advertised.host.name": _REST,
    "rest.advertised.port": _REST,
    "rest.advertised.listener": _REST,
    "offset.storage.replication.factor": "MM2's Connect offsets topic, which kmirror only reads",
    "offset.storage.partitions": "MM2's Connect offsets topic, which kmirror only reads",
    "config.providers": _PROVIDERS,
    "exactly.once.support": "the connector's request; whether MM2 ran exactly-once is its worker's "
                            "exactly.once.source.support",
    "transaction.boundary": "the connector's transactions; kmirror's are per copy task and commit interval",
    "client.id": "kmirror's clients name themselves (clusters.source.client_id, clusters.destination.client_id)",
}
_IGNORED_PREFIXES = {
    "config.storage.": _CONNECT,
    "status.storage.": _CONNECT,
    "offset.flush.": "Connect's offset flush: without exactly-once, records MM2 wrote after its last flush are "
                     "copied again (the log says how many at most)",
    "config.providers.": _PROVIDERS,
    "key.converter.": _CONVERTER,
    "value.converter.": _CONVERTER,
    "header.converter.": _CONVERTER,
    "listeners.https.": _REST,
    "metrics.": _METRICS,
}
_WORKER_ONLY = ("group.id", "exactly.once.source.support")
"""Worker settings MM2 reads only as ``<target>.name`` (``MirrorMakerConfig.workerConfig``)."""
_WORKER = (*_WORKER_ONLY, "offset.storage.topic", "key.converter", "value.converter", "header.converter")
_CLIENTS = ("consumer.", "producer.", "admin.")
_TLS_ENGINE = ("ssl.protocol", "ssl.enabled.protocols", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
               "ssl.secure.random.implementation", "ssl.provider")
_SASL_OTHERS = ("sasl.kerberos.", "sasl.oauthbearer.", "sasl.login.")
_UNKNOWN = "not a MirrorMaker 2 setting kmirror knows"


def _account_for_the_rest(r: _Ledger) -> None:
    """Every key no step looked at: another flow's or cluster's (ignored), one of MM2's
    internals (ignored, :data:`_IGNORED`), else unsupported, so a typo never passes."""
    for key in r.props:
        if key in r.used:
            continue
        scope, rest = _scope(r, key)
        if scope == r.flow:
            _flow_key(r, key, rest)
        elif scope in (r.source, r.target):
            _cluster_key(r, key, scope, rest)
        elif scope is not None and "->" in scope:
            r.ignore(key, f"another flow ({scope})")
        elif scope is not None:
            r.ignore(key, f"cluster {scope} is not in the flow {r.flow}")
        else:
            _top_level_key(r, key)


def _scope(r: _Ledger, key: str) -> tuple[str | None, str]:
    """``("A->B", rest)`` for a flow's key, ``("A", rest)`` for a cluster's, ``(None, key)``
    otherwise; the longest alias wins (aliases may contain dots)."""
    flows = [f"{a}->{b}" for a in r.clusters for b in r.clusters if a != b]
    for scope in sorted(flows, key=len, reverse=True) + sorted(r.clusters, key=len, reverse=True):
        if key.startswith(scope + "."):
            return scope, key[len(scope) + 1:]
    return None, key


def _known(name: str) -> str | None:
    """Why MM2's internal setting ``name`` means nothing to kmirror, if it is one."""
    if name in _IGNORED:
        return _IGNORED[name]
    return next((reason for prefix, reason in _IGNORED_PREFIXES.items() if name.startswith(prefix)), None)


def _flow_key(r: _Ledger, key: str, name: str) -> None:
    """``A->B.name``, a connector setting of the flow that no step read."""
    if (reason := _known(name)) is not None:
        r.ignore(key, reason)
    elif name in _WORKER_ONLY:
        r.ignore(key, f"a connector setting; MM2's worker for the flow reads {r.target}.{name}")
    elif name.startswith((*_CLIENTS, "source.", "target.")) and _is_security(name.split(".", 1)[1]):
        r.reject(key, "kmirror connects to each cluster one way: give it as <cluster>.<setting>")
    elif name.startswith((*_CLIENTS, "source.", "target.")):
        r.ignore(key, _CLIENT)
    else:
        r.reject(key, _UNKNOWN)


def _cluster_key(r: _Ledger, key: str, alias: str, name: str) -> None:
    """``A.name`` or ``B.name``: a connection, a client or a worker setting no step read."""
    if _is_security(name):
        _security_key(r, key, name, [alias])
    elif name.startswith(_CLIENTS):
        _client_key(r, key, alias, name.split(".", 1)[1])
    elif alias == r.source and name in _WORKER:
        r.ignore(key, f"a worker setting of flows into {alias}")
    elif (reason := _known(name)) is not None:
        r.ignore(key, reason)
    else:
        r.reject(key, _UNKNOWN)


def _top_level_key(r: _Ledger, name: str) -> None:
    """A top-level setting no step read: MM2 may have given it to every flow, or to none."""
    if _is_security(name):
        _security_key(r, name, name, [r.source, r.target])
    elif (reason := _known(name)) is not None:
        r.ignore(name, reason)
    elif name in _WORKER_ONLY:
        r.ignore(name, f"MM2 passes no top-level {name} to its workers (MirrorMakerConfig.workerConfig); "
                       f"the flow's worker reads {r.target}.{name}")
    elif name.startswith(_CLIENTS):
        r.ignore(name, _CLIENT)
    elif name == "enabled":
        r.reject(name, "a top-level enabled turns on every flow in MM2; kmirror takes one: give A->B.enabled = true")
    else:
        r.reject(name, _UNKNOWN)


def _is_security(name: str) -> bool:
    """A connection setting MM2 gives each cluster (``MirrorClientConfig.CLIENT_CONFIG_DEF``)."""
    return name in ("security.protocol", "bootstrap.servers") or name.startswith(("ssl.", "sasl."))


_READ_SECURITY = frozenset({
    "bootstrap.servers", "security.protocol", "ssl.truststore.location", "ssl.truststore.type",
    "ssl.truststore.password", "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password",
    "ssl.key.password", "ssl.endpoint.identification.algorithm", "sasl.mechanism", "sasl.jaas.config",
    *_SSL_UNSUPPORTED, *_SASL_UNSUPPORTED})
"""The security settings the steps read for a cluster that uses them."""


def _security_key(r: _Ledger, key: str, name: str, aliases: list[str]) -> None:
    """A security setting no step used: not in use under the protocol, a top-level one both
    clusters give their own of, Java's TLS engine, a mechanism kmirror does not speak, or unknown."""
    kind = "TLS" if name.startswith("ssl.") else "SASL" if name.startswith("sasl.") else None
    users = [alias for alias in aliases if _uses(r.protocol[alias], kind)]
    if not users:
        r.ignore(key, f"no {kind}: the security.protocol of {' and '.join(aliases)} uses none")
    elif len(aliases) > 1 and name in _READ_SECURITY:
        r.ignore(key, f"{' and '.join(users)} give their own {name}")
    elif name.startswith(_TLS_ENGINE):
        r.ignore(key, "a setting of Java's TLS engine; kmirror uses Python's ssl module and its defaults")
    elif name.startswith(_SASL_OTHERS):
        r.ignore(key, "for GSSAPI or OAUTHBEARER, which this cluster does not use")
    else:
        r.reject(key, _UNKNOWN)


def _uses(protocol: str, kind: str | None) -> bool:
    """Whether a cluster on ``protocol`` reads ``kind``'s settings (TLS, SASL; None: always)."""
    if kind == "TLS":
        return protocol.endswith("SSL")
    return protocol.startswith("SASL_") if kind == "SASL" else True


def _client_key(r: _Ledger, key: str, alias: str, name: str) -> None:
    """``A.consumer.x`` and the like: MM2's clients one by one. A security setting that differs
    from the cluster's cannot be kept, kmirror connecting to a cluster one way."""
    if _is_security(name):
        cluster = r.props.get(f"{alias}.{name}", r.props.get(name))
        if r.props[key] == cluster:
            r.ignore(key, f"the same as {alias}'s own {name}")
        else:
            r.reject(key, f"kmirror connects to {alias} one way: give it as {alias}.{name}")
    elif name == "isolation.level" and alias == r.source:
        r.ignore(key, "kmirror reads the source read_committed: aborted transactions are never copied")
    else:
        r.ignore(key, _CLIENT)
