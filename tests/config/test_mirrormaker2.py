"""A MirrorMaker 2 dedicated-mode file read as one kmirror job (mirror/config/mirrormaker2.py).

Expected values come from MM2's documented semantics and its source (MirrorMakerConfig,
MirrorSourceConfig, MirrorCheckpointConfig, DefaultTopicFilter, DefaultGroupFilter,
DefaultReplicationPolicy), each test naming the rule it holds the mapping to."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from mirror.config import ConfigError, load_config
from mirror.config.java_regex import java_regex
from mirror.config.mirrormaker2 import read_mirrormaker2
from mirror.config.printing import SECRET_MASK, config_toml

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
TWO_CLUSTERS = """\
clusters = A, B
A.bootstrap.servers = a1:9092, a2:9092
B.bootstrap.servers = b1:9092
A->B.enabled = true
"""


def mm2(tmp_path: Path, text: str, flow: str | None = None, *, base: str = TWO_CLUSTERS):
    """The mapping of ``base`` plus ``text``, written as an mm2.properties file."""
    path = tmp_path / "mm2.properties"
    path.write_text(base + text)
    return read_mirrormaker2(path, flow)


def config_of(tmp_path: Path, text: str, flow: str | None = None, *, base: str = TWO_CLUSTERS):
    """The kmirror configuration the file gives, after checking it has no unsupported key."""
    mapping = mm2(tmp_path, text, flow, base=base)
    assert mapping.unsupported == (), mapping.unsupported
    return load_config(base=mapping.settings)


def unsupported(mapping) -> dict[str, str]:
    return {key.key: key.reason for key in mapping.unsupported}


def ignored(mapping) -> dict[str, str]:
    return {key.key: key.reason for key in mapping.ignored}


# --- the flow -------------------------------------------------------------------------------

def test_the_enabled_flow_gives_clusters_and_aliases(tmp_path):
    config = config_of(tmp_path, "")
    assert config.clusters.source.bootstrap == ("a1:9092", "a2:9092")
    assert config.clusters.destination.bootstrap == ("b1:9092",)
    assert (config.clusters.source_cluster_alias, config.clusters.destination_cluster_alias) == ("A", "B")
    assert config.takeover.mirrormaker2 is True


def test_a_top_level_bootstrap_serves_a_cluster_without_its_own(tmp_path):
    """clusterProps: client settings (bootstrap.servers among them) fall back to the top level."""
    config = config_of(tmp_path, "", base="clusters = A, B\nbootstrap.servers = shared:9092\n"
                                          "B.bootstrap.servers = b:9092\nA->B.enabled = true\n")
    assert (config.clusters.source.bootstrap, config.clusters.destination.bootstrap) == (("shared:9092",), ("b:9092",))


@pytest.mark.parametrize("text, flow, message", [
    ("clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n", None, "enables no flow"),
    ("clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = yes\n", None,
     "enables no flow"),  # Boolean.parseBoolean: only "true" is true
    (TWO_CLUSTERS + "B->A.enabled = TRUE\n", None, "enables 2 flows (A->B, B->A): choose one with --flow"),
    (TWO_CLUSTERS, "A->C", "is not SOURCE->TARGET of two clusters"),
    (TWO_CLUSTERS, "A-B", "is not SOURCE->TARGET of two clusters"),
    (TWO_CLUSTERS, "A->A", "is not SOURCE->TARGET of two clusters"),
    (TWO_CLUSTERS, "B->A", "does not enable it (B->A.enabled = true)"),
    ("clusters = A, B\nA.bootstrap.servers = a:1\nA->B.enabled = true\n", None, "B.bootstrap.servers is not set"),
    ("A.bootstrap.servers = a:1\n", None, "has no 'clusters'"),
])
def test_a_file_without_one_usable_flow_is_one_clear_error(tmp_path, text, flow, message):
    with pytest.raises(ConfigError) as caught:
        mm2(tmp_path, "", flow, base=text)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_an_unreadable_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        read_mirrormaker2(tmp_path / "missing.properties")


def test_flow_chooses_among_several_and_the_others_keys_are_ignored(tmp_path):
    mapping = mm2(tmp_path, "B->A.enabled = true\nB->A.topics = b-only\nC.bootstrap.servers = c:1\n"
                            "clusters = A, B, C\n", "B->A")
    assert (mapping.source, mapping.target) == ("B", "A")
    assert ignored(mapping)["A->B.enabled"] == "another flow (A->B)"
    assert "not in the flow" in ignored(mapping)["C.bootstrap.servers"]
    assert load_config(base=mapping.settings).clusters.topics == "b-only"


# --- topics ---------------------------------------------------------------------------------

def test_per_flow_keys_win_over_top_level_ones(tmp_path):
    """connectorBaseConfig: A->B.x is put over x."""
    config = config_of(tmp_path, "topics = top.*\nA->B.topics = flow.*\n")
    assert config.clusters.topics == "flow.*"


@pytest.mark.parametrize("topic, selected", [
    ("orders", True), ("orders-eu", True), ("payments", True),
    ("payments-eu", False),   # each expression matches a whole name (Pattern.matches)
    ("xorders", False),
    ("orders.internal", False), ("orders-internal", False), ("orders.replica", False),  # MM2's default exclude
    ("__consumer_offsets", False), ("orders.internal.eu", True),   # excludes match whole names too
])
def test_topics_are_mm2s_list_matched_whole_and_its_default_exclude_applies(tmp_path, topic, selected):
    config = config_of(tmp_path, "A->B.topics = orders.*, payments\n")
    assert config.clusters.selects(topic) is selected


def test_topics_exclude_and_its_deprecated_name(tmp_path):
    config = config_of(tmp_path, "topics.blacklist = .*-tmp\n")
    assert config.clusters.selects("x-tmp") is False and config.clusters.selects("x.replica") is True
    mapping = mm2(tmp_path, "topics.exclude = a.*\ntopics.blacklist = b.*\n")
    assert "wins" in ignored(mapping)["topics.blacklist"]
    assert load_config(base=mapping.settings).clusters.selects("b1") is True


def test_an_empty_exclude_leaves_only_internal_topics_out_and_an_empty_topics_selects_nothing(tmp_path):
    """MirrorUtils.compilePatternList: a blank list matches no name. MM2 still never replicates
    its internal topics (ReplicationPolicy.isInternalTopic: __*, .*, *.internal, *-internal)."""
    config = config_of(tmp_path, "topics.exclude =\n")
    assert config.clusters.selects("x.replica") is True
    assert not any(config.clusters.selects(t) for t in ("x.internal", "x-internal", ".hidden", "__x"))
    config = config_of(tmp_path, "topics =\n")
    assert config.clusters.selects("orders") is False


def test_internal_topics_named_with_a_separator_are_never_mirrored(tmp_path):
    """DefaultReplicationPolicy.isMM2InternalTopic: the internal suffix takes the separator."""
    config = config_of(tmp_path, "replication.policy.separator = _\ntopics.exclude =\n")
    assert not config.clusters.selects("mm2-offset-syncs_B_internal")
    assert config.clusters.selects("orders_internals")


def test_properties_escapes_are_javas(tmp_path):
    """Properties.load: the file writes \\\\. for the regex \\. (a literal dot)."""
    config = config_of(tmp_path, "topics = orders\\\\.eu\n")
    assert config.clusters.selects("orders.eu") is True and config.clusters.selects("ordersXeu") is False


# --- Java's regular expressions -------------------------------------------------------------

@pytest.mark.parametrize("java, matches, misses", [
    (r"\Qa.b\E", ["a.b"], ["axb"]),
    (r"(?<x>ab)-\k<x>", ["ab-ab"], ["ab-ba"]),
    (r"\p{Alpha}+\p{Digit}", ["abc1"], ["ab12", "é1"]),
    (r"(?i)orders|payments", ["ORDERS", "Payments"], ["x"]),   # a leading (?i) holds to the end
    (r"a|(?i)b|c", ["a", "B", "C"], ["A"]),
    (r"(?i:x)y", ["Xy"], ["XY"]),
    (r"\w+", ["a_1"], ["é"]),                                   # Java's \w is ASCII
    (r"[\w.-]+\z", ["a.b-c"], ["a b"]),
    (r"x{2,3}", ["xx", "xxx"], ["x", "xxxx"]),
])
def test_java_expressions_read_the_same_in_python(java, matches, misses):
    python = java_regex(java)
    assert all(re.fullmatch(python, name) for name in matches), python
    assert not any(re.fullmatch(python, name) for name in misses), python


@pytest.mark.parametrize("java", [
    "a*+", "a++", "a?+", "a{2}+",            # possessive
    "(?>a)",                                 # atomic (Python 3.11+ only)
    r"\p{L}+", r"\p{javaLowerCase}",         # Unicode and java.lang.Character classes
    "[a-z&&[^e]]", "[a[b]]",                 # intersection, union
    r"\h", r"\R", r"\e", r"\G", r"\x{41}",   # Java-only escapes
    r"(a)\1",                                # numbered back-reference
    "a(?i)b",                                # flags in the middle of an alternative
    "(?x)a b",                               # comments mode differs in classes
])
def test_java_only_syntax_is_refused(java):
    with pytest.raises(ValueError, match="cannot read as Java does"):
        java_regex(java)


def test_java_only_syntax_in_a_list_is_unsupported_and_named(tmp_path):
    mapping = mm2(tmp_path, "A->B.topics = orders.*+\n")
    assert "possessive" in unsupported(mapping)["A->B.topics"]


# --- naming ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text, policy, remote", [
    ("", "prefix", "A.orders"),   # DefaultReplicationPolicy is MM2's default
    ("replication.policy.class = org.apache.kafka.connect.mirror.DefaultReplicationPolicy\n", "prefix", "A.orders"),
    ("replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n", "identity", "orders"),
    ("replication.policy.separator = _\n", "prefix", "A_orders"),
    ("A->B.replication.policy.separator = __\n", "prefix", "A__orders"),
])
def test_replication_policy_and_separator(tmp_path, text, policy, remote):
    config = config_of(tmp_path, text)
    assert config.clusters.replication_policy == policy
    assert config.clusters.destination_topic("orders") == remote


def test_a_custom_policy_or_a_separator_kafka_cannot_name_is_unsupported(tmp_path):
    mapping = mm2(tmp_path, "replication.policy.class = com.example.MyPolicy\n")
    assert "custom ReplicationPolicy" in unsupported(mapping)["replication.policy.class"]
    mapping = mm2(tmp_path, "replication.policy.separator = /\n")
    assert "replication.policy.separator" in unsupported(mapping)


def test_an_alias_outside_kmirrors_rule_is_unsupported(tmp_path):
    base = ("clusters = us.west, B\nus.west.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
            "us.west->B.enabled = true\n")
    mapping = mm2(tmp_path, "", base=base)
    assert "'us.west'" in unsupported(mapping)["clusters"]


# --- syncs ----------------------------------------------------------------------------------

def test_topic_configs_and_acls_are_synced_by_default_for_every_replicated_topic(tmp_path):
    """MM2 syncs configs and ACLs (both on by default, every 600 s) of every topic it replicates."""
    config = config_of(tmp_path, "")
    sync = config.sync
    assert (sync.topic_configs, sync.topic_acls, sync.topic_configs_interval_s) == (True, True, 600)
    assert config.sync.existing_topics is True


def test_no_config_or_acl_sync_leaves_existing_topics_alone(tmp_path):
    config = config_of(tmp_path, "sync.topic.configs.enabled = false\nA->B.sync.topic.acls.enabled = FALSE\n"
                                 "sync.topic.configs.interval.seconds = 5\n")
    assert (config.sync.topic_configs, config.sync.topic_acls, config.sync.existing_topics) == (False, False, False)


@pytest.mark.parametrize("text, interval", [
    ("sync.topic.configs.interval.seconds = 300\n", 300),
    ("sync.topic.configs.interval.seconds = 300\nsync.topic.acls.interval.seconds = 300\n", 300),
    ("sync.topic.configs.enabled = false\nsync.topic.acls.interval.seconds = 120\n", 120),
])
def test_configs_and_acls_share_one_interval(tmp_path, text, interval):
    assert config_of(tmp_path, text).sync.topic_configs_interval_s == interval


def test_two_different_intervals_cannot_be_kept(tmp_path):
    mapping = mm2(tmp_path, "sync.topic.configs.interval.seconds = 300\nsync.topic.acls.interval.seconds = 120\n")
    assert "one interval" in unsupported(mapping)["sync.topic.acls.interval.seconds"]


def test_config_properties_exclude_is_a_list_of_whole_name_expressions(tmp_path):
    config = config_of(tmp_path, "config.properties.exclude = retention\\\\..*, cleanup.policy\n")
    assert config.sync.config_properties_exclude == (r"retention\..*", "cleanup.policy")
    config = config_of(tmp_path, "config.properties.blacklist = segment.bytes\n")
    assert config.sync.config_properties_exclude == ("segment.bytes",)


def test_no_group_offsets_are_synced_unless_mm2_did(tmp_path):
    """sync.group.offsets.enabled defaults to false: no groups, and the group keys mean nothing."""
    mapping = mm2(tmp_path, "groups = app.*\n")
    assert load_config(base=mapping.settings).sync.groups is None
    assert "sync.group.offsets.enabled is false" in ignored(mapping)["groups"]


@pytest.mark.parametrize("group, synced", [
    ("app", True), ("billing", True),
    ("console-consumer-4711", False), ("connect-mm2", False), ("__internal", False),  # MM2's default exclude
])
def test_group_offsets_default_lists(tmp_path, group, synced):
    config = config_of(tmp_path, "sync.group.offsets.enabled = true\n")
    assert (re.fullmatch(config.sync.groups, group) is not None) is synced
    assert config.sync.group_offsets_interval_s == 60


@pytest.mark.parametrize("group, synced", [
    ("app-prod", True), ("billing", True),
    ("app-test-1", False),   # an include and an exclude match: excludes win (DefaultGroupFilter)
    ("billing2", False),     # whole names only
    ("other", False),
])
def test_group_offsets_match_an_include_and_no_exclude(tmp_path, group, synced):
    config = config_of(tmp_path, "A->B.sync.group.offsets.enabled = true\nA->B.groups = app-.*, billing\n"
                                 "groups.exclude = app-test.*\nsync.group.offsets.interval.seconds = 10\n")
    assert (re.fullmatch(config.sync.groups, group) is not None) is synced
    assert config.sync.group_offsets_interval_s == 10


# --- routing, parallelism, converters ------------------------------------------------------

def test_replication_factor_tasks_and_the_targets_producer_codec(tmp_path):
    config = config_of(tmp_path, "replication.factor = 3\nA->B.tasks.max = 8\nB.producer.compression.type = zstd\n"
                                 "A.producer.compression.type = gzip\n")
    assert (config.routing.replication_factor, config.streaming.copy_tasks) == (3, 8)
    assert config.routing.compression == "zstd"   # the worker's producer writes B (workerConfig)


def test_without_a_producer_codec_kmirror_keeps_each_batchs(tmp_path):
    assert config_of(tmp_path, "").routing.compression == "source"


@pytest.mark.parametrize("text, fate", [
    ("key.converter = org.apache.kafka.connect.converters.ByteArrayConverter\n", "ignored"),
    ("B.value.converter = org.apache.kafka.connect.json.JsonConverter\n", "unsupported"),
    ("A->B.header.converter = org.apache.kafka.connect.storage.SimpleHeaderConverter\n", "unsupported"),
])
def test_only_byte_array_converters_copy_bytes_as_they_are(tmp_path, text, fate):
    mapping = mm2(tmp_path, text)
    key = text.partition(" =")[0]
    assert key in (ignored(mapping) if fate == "ignored" else unsupported(mapping))


# --- the takeover -----------------------------------------------------------------------------

def test_mm2s_default_state_names_are_kmirrors_defaults(tmp_path):
    """MirrorMakerConfig.workerConfig: group <A>-mm2, offsets mm2-offsets.<A>.internal; offset
    syncs mm2-offset-syncs.<B>.internal on the source (MirrorSourceConfig.offsetSyncsTopic)."""
    config = config_of(tmp_path, "")
    assert (config.mm2_connect_group, config.mm2_offsets_topic, config.mm2_offset_syncs_topic) == (
        "A-mm2", "mm2-offsets.A.internal", "mm2-offset-syncs.B.internal")
    assert config.takeover.offsets_topic is None and config.takeover.offset_syncs_location == "source"


def test_state_names_from_the_file(tmp_path):
    mapping = mm2(tmp_path, "offset.storage.topic = mm2-offsets-custom\nB.group.id = my-mm2\ngroup.id = top-level\n"
                            "offset-syncs.topic.location = target\n")
    config = load_config(base=mapping.settings)
    assert (config.mm2_offsets_topic, config.mm2_connect_group) == ("mm2-offsets-custom", "my-mm2")
    # On the target, the syncs topic is named after the source (the cluster it is not on).
    assert (config.takeover.offset_syncs_location, config.mm2_offset_syncs_topic) == (
        "destination", "mm2-offset-syncs.A.internal")
    assert "workerConfig" in ignored(mapping)["group.id"]


@pytest.mark.parametrize("text, syncs", [
    ("replication.policy.separator = _\n", "mm2-offset-syncs_B_internal"),
    ("replication.policy.separator = _\nreplication.policy.internal.topic.separator.enabled = false\n",
     "mm2-offset-syncs.B.internal"),
])
def test_the_separator_names_mm2s_internal_topics_unless_turned_off(tmp_path, text, syncs):
    assert config_of(tmp_path, text).mm2_offset_syncs_topic == syncs


@pytest.mark.parametrize("text, mode, exact", [
    ("", "at-least-once", False),
    ("B.exactly.once.source.support = enabled\n", "exactly-once", True),
    ("B.exactly.once.source.support = preparing\n", "at-least-once", False),
    # MM2 passes neither to the flow's worker: only the target's own counts (workerConfig).
    ("exactly.once.source.support = enabled\n", "at-least-once", False),
    ("A.exactly.once.source.support = enabled\n", "at-least-once", False),
])
def test_delivery_keeps_mm2s_promise(tmp_path, text, mode, exact):
    config = config_of(tmp_path, text)
    assert (config.delivery.mode, config.takeover.exactly_once) == (mode, exact)


# --- security -------------------------------------------------------------------------------

def test_sasl_scram_over_tls_with_pem_files(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    config = config_of(tmp_path, f"""\
A.security.protocol = SASL_SSL
A.sasl.mechanism = SCRAM-SHA-512
A.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="mirror" password="p\\\\"w";
A.ssl.truststore.type = PEM
A.ssl.truststore.location = {ca}
A.ssl.truststore.password = ignored
A.ssl.endpoint.identification.algorithm =
""")
    source = config.clusters.source
    assert (source.security_protocol, source.sasl.mechanism, source.sasl.username) == (
        "SASL_SSL", "SCRAM-SHA-512", "mirror")
    assert source.sasl.password.get_secret_value() == 'p"w'
    assert (source.tls.ca_file, source.tls.check_hostname) == (ca, False)
    assert config.clusters.destination.security_protocol == "PLAINTEXT"


def test_top_level_security_applies_to_both_clusters(tmp_path):
    config = config_of(tmp_path, "security.protocol = SASL_PLAINTEXT\nsasl.mechanism = PLAIN\nsasl.jaas.config = "
                                 f"{PLAIN} required username=u password=p;\n")
    for cluster in (config.clusters.source, config.clusters.destination):
        assert (cluster.security_protocol, cluster.sasl.mechanism, cluster.sasl.username) == (
            "SASL_PLAINTEXT", "PLAIN", "u")


def test_a_pem_keystore_with_its_key_password(tmp_path):
    cert = tmp_path / "client.pem"
    cert.write_text("x")
    config = config_of(tmp_path, f"B.security.protocol = SSL\nB.ssl.keystore.type = PEM\n"
                                 f"B.ssl.keystore.location = {cert}\nB.ssl.key.password = secret\n")
    tls = config.clusters.destination.tls
    assert tls.cert_file == cert and tls.key_password.get_secret_value() == "secret"


@pytest.mark.parametrize("text, key, reason", [
    ("A.security.protocol = SSL\nA.ssl.truststore.location = /etc/ts.jks\n", "A.ssl.truststore.location", "keytool"),
    ("A.security.protocol = SSL\nA.ssl.keystore.type = PKCS12\nA.ssl.keystore.location = /k.p12\n",
     "A.ssl.keystore.location", "PEM"),
    ("A.security.protocol = SASL_SSL\nA.sasl.jaas.config = x required;\n", "A.security.protocol", "GSSAPI"),
    ("A.security.protocol = SASL_SSL\nA.sasl.mechanism = OAUTHBEARER\n", "A.sasl.mechanism", "OAUTHBEARER"),
    ("A.security.protocol = SASL_SSL\nA.sasl.mechanism = PLAIN\nA.sasl.jaas.config = "
     "org.apache.kafka.common.security.scram.ScramLoginModule required username=u password=p;\n",
     "A.sasl.jaas.config", "PlainLoginModule"),
    ("A.security.protocol = SASL_SSL\nA.sasl.mechanism = SCRAM-SHA-256\nA.sasl.jaas.config = "
     "org.apache.kafka.common.security.scram.ScramLoginModule required username=u password=p tokenauth=true;\n",
     "A.sasl.jaas.config", "no other option"),
    ("A.security.protocol = SSL\nA.consumer.security.protocol = PLAINTEXT\n", "A.consumer.security.protocol",
     "one way"),
    ("A.security.protocol = SSL\nA.ssl.endpoint.identification.algorithm = ldap\n",
     "A.ssl.endpoint.identification.algorithm", "host names"),
    ("A.security.protocol = SSL\nssl.cipher.suites = TLS_AES_128_GCM_SHA256\n", "ssl.cipher.suites", "cipher"),
    ("A.security.protocol = SASL_SSL\nA.sasl.mechanism = PLAIN\nA.sasl.jaas.config = "
     "${file:/etc/kafka/secrets.properties:jaas}\n", "A.sasl.jaas.config", "config providers"),
])
def test_security_kmirror_cannot_keep_is_unsupported(tmp_path, text, key, reason):
    mapping = mm2(tmp_path, text)
    assert reason in unsupported(mapping)[key]


def test_security_settings_not_in_use_are_ignored(tmp_path):
    mapping = mm2(tmp_path, "A.ssl.truststore.location = /etc/ts.jks\nsasl.mechanism = PLAIN\n"
                            "A.security.protocol = SSL\nA.consumer.security.protocol = SSL\n"
                            "A.ssl.truststore.type = PEM\nA.ssl.enabled.protocols = TLSv1.3\n", )
    assert unsupported(mapping) == {}
    assert "no SASL" in ignored(mapping)["sasl.mechanism"]
    assert "same as" in ignored(mapping)["A.consumer.security.protocol"]
    assert "Java's TLS engine" in ignored(mapping)["A.ssl.enabled.protocols"]


def test_passwords_are_never_printed(tmp_path):
    mapping = mm2(tmp_path, "B.security.protocol = SASL_PLAINTEXT\nB.sasl.mechanism = PLAIN\nB.sasl.jaas.config = "
                            'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
                            'password="hunter2";\n')
    assert "hunter2" not in repr(mapping)
    assert load_config(base=mapping.settings).clusters.destination.sasl.password.get_secret_value() == "hunter2"


# --- everything else ------------------------------------------------------------------------

def test_unknown_keys_are_unsupported_each_named(tmp_path):
    """A typo MM2 would ignore as silently must not pass: each key is named."""
    mapping = mm2(tmp_path, "topic = orders\nA->B.tpoics = x\nB.bootstrap.server = b:1\nenabled = true\n"
                            "topic.filter.class = com.example.Filter\n")
    assert set(unsupported(mapping)) == {"topic", "A->B.tpoics", "B.bootstrap.server", "enabled",
                                         "topic.filter.class"}
    assert unsupported(mapping)["topic"] == "not a MirrorMaker 2 setting kmirror knows"


@pytest.mark.parametrize("key", [
    "emit.checkpoints.enabled", "emit.checkpoints.interval.seconds", "emit.heartbeats.enabled",
    "emit.heartbeats.interval.seconds", "refresh.topics.interval.seconds", "refresh.groups.enabled",
    "offset.flush.interval.ms", "status.storage.topic", "config.storage.topic", "dedicated.mode.enable.internal.rest",
    "listeners", "A->B.emit.heartbeats.enabled", "B.offset.flush.timeout.ms", "A.consumer.isolation.level",
    "A.consumer.max.poll.records", "B.producer.linger.ms", "offset.lag.max", "use.incremental.alter.configs",
])
def test_mm2_internals_are_ignored_with_a_reason(tmp_path, key):
    value = "600" if "seconds" in key or key.endswith(".ms") else "true" if "enable" in key else "x"
    mapping = mm2(tmp_path, f"{key} = {value}\n")
    assert unsupported(mapping) == {} and ignored(mapping)[key]


def test_kafkas_shipped_example_maps_with_nothing_unsupported(tmp_path):
    """Kafka's config/connect-mirror-maker.properties, flow A->B."""
    shipped = """\
# Sample MirrorMaker 2.0 top-level configuration file
clusters = A, B
A.bootstrap.servers = A_host1:9092, A_host2:9092, A_host3:9092
B.bootstrap.servers = B_host1:9092, B_host2:9092, B_host3:9092
A->B.enabled = true
A->B.topics = .*
B->A.enabled = true
B->A.topics = .*
replication.factor=1
checkpoints.topic.replication.factor=1
heartbeats.topic.replication.factor=1
offset-syncs.topic.replication.factor=1
offset.storage.replication.factor=1
status.storage.replication.factor=1
config.storage.replication.factor=1
# replication.policy.separator = _
"""
    mapping = mm2(tmp_path, "", "A->B", base=shipped)
    assert mapping.unsupported == ()
    assert set(ignored(mapping)) == {"B->A.enabled", "B->A.topics", "checkpoints.topic.replication.factor",
                                     "heartbeats.topic.replication.factor", "offset-syncs.topic.replication.factor",
                                     "offset.storage.replication.factor", "status.storage.replication.factor",
                                     "config.storage.replication.factor"}
    config = load_config(base=mapping.settings)
    assert config.clusters.source.bootstrap == ("A_host1:9092", "A_host2:9092", "A_host3:9092")
    assert (config.clusters.replication_policy, config.clusters.destination_topic("t")) == ("prefix", "A.t")
    assert config.clusters.selects("orders") and not config.clusters.selects("mm2-offsets.B.internal")
    assert not config.clusters.selects("B.orders")   # came from B: never mirrored back (isCycle)
    assert (config.routing.replication_factor, config.delivery.mode) == (1, "at-least-once")


# --- load_config's base and --print-config --------------------------------------------------

def test_the_config_file_wins_over_the_mm2_file_and_flags_over_both(tmp_path, monkeypatch):
    mapping = mm2(tmp_path, "A.security.protocol = SASL_PLAINTEXT\nA.sasl.mechanism = PLAIN\nA.sasl.jaas.config = "
                            "org.apache.kafka.common.security.plain.PlainLoginModule required username=u password=p;\n")
    path = tmp_path / "kmirror.toml"
    path.write_text('[clusters]\ntopics = "mine"\n[clusters.source.sasl]\npassword_env = "KM_PW"\n'
                    '[routing]\nreplication_factor = 2\n')
    monkeypatch.setenv("KM_PW", "from-env")
    config = load_config(path, {"routing.replication_factor": 5}, base=mapping.settings)
    assert config.clusters.topics == "mine" and config.routing.replication_factor == 5
    assert config.clusters.source.sasl.username == "u"   # the rest of the MM2 table stays
    assert config.clusters.source.sasl.password.get_secret_value() == "from-env"
    assert config.clusters.source_alias == "A"


def test_printed_config_reads_back_to_the_same_config(tmp_path):
    mapping = mm2(tmp_path, "replication.policy.separator = _\nconfig.properties.exclude = a, b\n"
                            "sync.group.offsets.enabled = true\n")
    config = load_config(base=mapping.settings).replaced("streaming", checkpoint=tmp_path / "ck", starting_offsets=17,
                                                          spark_conf={"spark.executor.memory": "2g"})
    config = config.replaced("limits", max_outage_s=math.inf)
    printed = tmp_path / "printed.toml"
    printed.write_text(config_toml(config))
    assert load_config(printed) == config
    assert "[takeover]" in printed.read_text() and "copy_tasks" not in printed.read_text()


def test_printed_secrets_are_masked_with_a_comment_above(tmp_path):
    mapping = mm2(tmp_path, "B.security.protocol = SASL_SSL\nB.sasl.mechanism = PLAIN\nB.sasl.jaas.config = "
                            f"{PLAIN} required username=u password=pw;\n")
    config = load_config(base=mapping.settings)
    text = config_toml(config)
    lines = text.splitlines()
    at = lines.index(f'password = "{SECRET_MASK}"')
    assert lines[at - 1].startswith("# password: masked") and "MirrorMaker 2" in lines[at - 1]
    assert "pw;" not in text and '"pw"' not in text
    printed = tmp_path / "printed.toml"
    printed.write_text(text)
    assert load_config(printed).model_dump(mode="json") == config.model_dump(mode="json")


def test_a_config_provider_matters_only_where_the_value_is_used(tmp_path):
    cert = tmp_path / "client.pem"
    cert.write_text("x")
    mapping = mm2(tmp_path, f"config.providers = file\nA.security.protocol = SSL\nA.ssl.keystore.type = PEM\n"
                            f"A.ssl.keystore.location = {cert}\nA.ssl.keystore.password = ${{file:/s:ks}}\n"
                            "A.ssl.key.password = ${file:/s:key}\n")
    assert set(unsupported(mapping)) == {"A.ssl.key.password"}
    assert {"config.providers", "A.ssl.keystore.password"} <= set(ignored(mapping))
