"""Configuration: TOML plus command-line overrides, and errors that name the field."""

from __future__ import annotations

import pytest

from mirror.cli import build_parser
from mirror.config import ConfigError, load_config
from mirror.options import overrides_from_args

MINIMAL = {"source.bootstrap": "a:9092", "destination.bootstrap": "b:9092", "topics": "orders.*"}


def test_toml_is_read_and_flags_override_it(tmp_path):
    path = tmp_path / "mirror.toml"
    path.write_text('topics = "x"\npartitioning = "preserve"\n[source]\nbootstrap = "s1:9092, s2:9092"\n'
                    '[destination]\nbootstrap = ["d:9092"]\nclient_id = "mm"\n[retry]\nattempts = 3\n')
    config = load_config(path, {"partitioning": "by-key", "destination.bootstrap": None})
    assert config.clusters.source.bootstrap == ("s1:9092", "s2:9092")
    assert config.clusters.destination.bootstrap == ("d:9092",) and config.clusters.destination.client_id == "mm"
    assert config.routing.partitioning == "by-key" and config.clusters.topics == "x"
    assert config.limits.retry.attempts == 3


def test_spark_conf_flags_add_to_the_file_table(tmp_path):
    path = tmp_path / "mirror.toml"
    path.write_text('[spark_conf]\n"spark.executor.memory" = "2g"\n"spark.ui.enabled" = "false"\n')
    args = build_parser().parse_args(["run", "--source", "a:9092", "--destination", "b:9092", "--topics", "t",
                                      "--spark-conf", "spark.executor.memory=4g", "--spark-conf", "spark.x=1"])
    config = load_config(path, overrides_from_args(args))
    assert config.streaming.spark_conf == {"spark.executor.memory": "4g", "spark.ui.enabled": "false", "spark.x": "1"}


def test_command_line_flags_map_onto_the_model():
    args = build_parser().parse_args([
        "run", "--source", "a:1", "--destination", "b:2", "--topics", "t.*", "--rename", "src.{topic}",
        "--compression", "zstd", "--once", "--max-bytes-per-trigger", "1000", "--spark-conf", "spark.x=1=2"])
    config = load_config(None, overrides_from_args(args))
    assert (config.clusters.source.bootstrap, config.clusters.rename, config.routing.compression,
            config.streaming.once) == (("a:1",), "src.{topic}", "zstd", True)
    assert config.streaming.max_bytes_per_trigger == 1000 and config.streaming.spark_conf == {"spark.x": "1=2"}
    assert config.clusters.destination_topic("t1") == "src.t1"


@pytest.mark.parametrize("change, field, reason", [
    ({"source.bootstrap": "no-port"}, "source.bootstrap", "HOST:PORT"),
    ({"source.bootstrap": "h:99999"}, "source.bootstrap", "HOST:PORT"),
    ({"topics": "("}, "topics", "not a regular expression"),
    ({"rename": "{name}"}, "rename", "{topic}"),
    ({"rename": "bad/{topic}"}, "rename", "legal Kafka topic name"),
    ({"partitioning": "random"}, "partitioning", "by-key"),
    ({"compression": "brotli"}, "compression", "zstd"),
    ({"max_bytes_per_trigger": 0}, "max_bytes_per_trigger", "greater than or equal to 1"),
    ({"unknown_key": 1}, "unknown_key", "Extra inputs"),
])
def test_invalid_values_name_the_field_and_the_reason(change, field, reason):
    with pytest.raises(ConfigError) as caught:
        load_config(None, {**MINIMAL, **change})
    assert f"{field}: " in str(caught.value) and reason in str(caught.value)


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as caught:
        load_config(None, {"topics": "("})
    message = str(caught.value)
    assert "source: Field required" in message and "destination: Field required" in message and "topics:" in message


def test_mirroring_a_cluster_onto_itself_needs_a_rename():
    with pytest.raises(ConfigError, match="onto themselves"):
        load_config(None, {**MINIMAL, "destination.bootstrap": "a:9092"})
    assert load_config(None, {**MINIMAL, "destination.bootstrap": "a:9092", "rename": "copy.{topic}"})


def test_unreadable_or_malformed_files_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("topics = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)


def test_topic_selection_matches_whole_names_and_skips_internal_topics():
    config = load_config(None, {**MINIMAL, "topics": "orders.*|__.*", "exclude": ".*-tmp"})
    assert config.clusters.selects("orders.eu") and not config.clusters.selects("xorders")
    assert not config.clusters.selects("orders-tmp") and not config.clusters.selects("__consumer_offsets")


def test_kmirror_run_exits_2_on_bad_configuration(capsys):
    from mirror.cli import main

    assert main(["run", "--source", "nope", "--destination", "b:1", "--topics", "x"]) == 2


def test_the_deploy_example_is_a_valid_configuration():
    from pathlib import Path

    example = Path(__file__).parents[2] / "deploy" / "kmirror.example.toml"
    config = load_config(example)
    assert config.clusters.destination_topic("orders.eu") == "eu.orders.eu" and config.clusters.selects("payments")


def test_starting_offsets_take_a_time_as_iso_8601_or_epoch_milliseconds():
    base = {"source.bootstrap": "a:1", "destination.bootstrap": "b:1", "topics": "t"}
    def start(value):
        return load_config(None, {**base, "starting_offsets": value}).streaming.starting_offsets

    assert start("2026-11-23T08:00:00Z") == 1795420800000
    assert start("2026-11-23T08:00:00") == 1795420800000
    assert start("2026-11-23T09:00:00+01:00") == 1795420800000
    assert start("1795420800000") == 1795420800000
    assert start("latest") == "latest"
    for bad in ("yesterday", "-5", "2026-13-01"):
        with pytest.raises(ConfigError, match="starting_offsets"):
            load_config(None, {**base, "starting_offsets": bad})


OLD_LAYOUT = '''
topics = "orders\\\\..*|payments"
exclude = ".*\\\\.tmp"
rename = "eu.{topic}"
partitioning = "by-key"
compression = "source"
starting_offsets = "earliest"
on_data_loss = "fail"
checkpoint = "/var/lib/kmirror/eu-orders"
delivery = "exactly-once"
name = "eu-orders"
max_bytes_per_trigger = 268435456
master = "local[2]"

[source]
bootstrap = "kafka-eu-1:9092,kafka-eu-2:9092"
client_id = "kmirror-eu"

[destination]
bootstrap = ["kafka-us-1:9092", "kafka-us-2:9092"]
client_id = "kmirror-eu"

[retry]
attempts = 10
initial_backoff_s = 0.2
max_backoff_s = 10.0

[spark_conf]
"spark.executor.memory" = "2g"
'''
"""deploy/kmirror.example.toml as it was written before the configuration had sections."""


def test_a_file_from_before_the_sections_reads_as_its_sectioned_twin(tmp_path):
    from pathlib import Path

    old = tmp_path / "old.toml"
    old.write_text(OLD_LAYOUT)
    assert load_config(old) == load_config(Path(__file__).parents[2] / "deploy" / "kmirror.example.toml")


def test_each_renamed_key_is_read_at_its_new_place(tmp_path):
    old = tmp_path / "old.toml"
    old.write_text('delivery = "at-least-once"\nsync_topic_configs = false\nsync_topic_configs_interval_s = 5\n'
                   'sync_topic_acls = false\nsync_existing_topics = true\nsync_group_offsets_interval_s = 7\n')
    config = load_config(old, MINIMAL)
    assert config.delivery.mode == "at-least-once"
    assert (config.sync.topic_configs, config.sync.topic_configs_interval_s, config.sync.topic_acls,
            config.sync.existing_topics, config.sync.group_offsets_interval_s) == (False, 5.0, False, True, 7.0)


def test_a_key_given_both_ways_is_an_error_naming_both(tmp_path):
    both = tmp_path / "both.toml"
    both.write_text('partitioning = "by-key"\n[routing]\npartitioning = "preserve"\n')
    twice = r"routing\.partitioning is given twice \(as partitioning and in \[routing\]\)"
    with pytest.raises(ConfigError, match=twice):
        load_config(both, MINIMAL)
    both.write_text('[source]\nbootstrap = "a:1"\n[clusters.source]\nbootstrap = "b:2"\n')
    with pytest.raises(ConfigError, match=r"clusters\.source is given twice \(as source and in \[clusters\]\)"):
        load_config(both, MINIMAL)


def test_flags_and_sectioned_overrides_win_over_a_flat_file(tmp_path):
    old = tmp_path / "old.toml"
    old.write_text('partitioning = "by-key"\n[spark_conf]\n"spark.a" = "1"\n"spark.b" = "1"\n')
    config = load_config(old, {**MINIMAL, "routing.partitioning": "preserve", "spark_conf": {"spark.b": "2"}})
    assert config.routing.partitioning == "preserve"
    assert config.streaming.spark_conf == {"spark.a": "1", "spark.b": "2"}


def test_the_trigger_is_five_seconds_with_resident_copiers_and_one_without_unless_set():
    """Resident copiers copy as records arrive: the trigger only checkpoints the plan, leases
    new partitions and reports (docs/configuration.md). Without them records wait for it."""
    base = {"source.bootstrap": "a:9092", "destination.bootstrap": "b:9092", "topics": "t"}
    assert load_config(None, base).streaming.trigger_s == 5.0
    assert load_config(None, {**base, "copy_between_micro_batches": False}).streaming.trigger_s == 1.0
    assert load_config(None, {**base, "trigger_interval_s": 0.5}).streaming.trigger_s == 0.5
    assert load_config(None, {**base, "trigger_interval_s": 0}).streaming.trigger_s == 0
