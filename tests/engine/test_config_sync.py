"""Which topic configs a destination takes from its source (mirror.engine.config_sync), by
MirrorMaker 2's rules: what the source sets is set, what the source leaves at its default is
deleted at the destination, read-only, sensitive, static-broker and excluded names are left
alone. The live sync is tested against brokers in tests/engine/test_topic_sync.py."""

from __future__ import annotations

from mirror.config import DEFAULT_CONFIG_EXCLUDE
from mirror.engine.config_sync import ConfigFilter, config_changes, creation_configs
from mirror.kafka.admin import ConfigOp, ConfigChange, ConfigEntry, ConfigSource

DYNAMIC, DEFAULT, STATIC = ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DEFAULT_CONFIG, ConfigSource.STATIC_BROKER_CONFIG
CHOSEN = ConfigFilter(DEFAULT_CONFIG_EXCLUDE)


def entry(name, value, source=DYNAMIC, *, read_only=False, sensitive=False):
    return ConfigEntry(name, value, source, read_only, sensitive)


def test_a_new_topic_takes_what_the_source_sets_and_nothing_excluded():
    source = [entry("retention.ms", "-1"), entry("cleanup.policy", "delete", DEFAULT),
              entry("min.insync.replicas", "2"), entry("message.timestamp.type", "LogAppendTime"),
              entry("log.dirs", "/x", STATIC), entry("password", None, sensitive=True)]
    assert creation_configs(source, CHOSEN) == {"retention.ms": "-1", "message.timestamp.type": "LogAppendTime"}


def test_a_changed_source_value_is_set_and_an_equal_one_is_not_sent_again():
    source = [entry("retention.ms", "1000"), entry("segment.ms", "600000")]
    destination = [entry("retention.ms", "604800000", DEFAULT), entry("segment.ms", "600000")]
    assert config_changes(source, destination, CHOSEN) == [ConfigChange("retention.ms", ConfigOp.SET, "1000")]


def test_a_config_the_source_left_at_default_goes_back_to_default_at_the_destination():
    source = [entry("retention.ms", "604800000", DEFAULT), entry("segment.bytes", "1073741824", DEFAULT)]
    destination = [entry("retention.ms", "1000"), entry("segment.bytes", "1073741824", DEFAULT)]
    assert config_changes(source, destination, CHOSEN) == [ConfigChange("retention.ms", ConfigOp.DELETE)]


def test_a_hand_made_destination_change_is_overwritten_unless_excluded():
    source = [entry("retention.ms", "1000"), entry("min.insync.replicas", "1", DEFAULT)]
    destination = [entry("retention.ms", "5"), entry("min.insync.replicas", "2")]
    assert config_changes(source, destination, CHOSEN) == [ConfigChange("retention.ms", ConfigOp.SET, "1000")]
    only_retention_kept = ConfigFilter(exclude=(r"retention\..*",))
    assert config_changes(source, destination, only_retention_kept) == [ConfigChange("min.insync.replicas", ConfigOp.DELETE)]


def test_configs_the_destination_does_not_know_or_cannot_change_are_left_out():
    source = [entry("remote.storage.enable", "true"), entry("max.message.bytes", "2000000")]
    destination = [entry("max.message.bytes", "1048588", DEFAULT, read_only=True)]
    assert config_changes(source, destination, CHOSEN) == []


def test_message_timestamp_type_is_copied_unlike_in_mirrormaker_2():
    assert not any(__import__("re").fullmatch(p, "message.timestamp.type") for p in DEFAULT_CONFIG_EXCLUDE)
    assert config_changes([entry("message.timestamp.type", "LogAppendTime")],
                          [entry("message.timestamp.type", "CreateTime", DEFAULT)], CHOSEN) == \
        [ConfigChange("message.timestamp.type", ConfigOp.SET, "LogAppendTime")]
