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
    assert config.source.bootstrap == ("s1:9092", "s2:9092")
    assert config.destination.bootstrap == ("d:9092",) and config.destination.client_id == "mm"
    assert config.partitioning == "by-key" and config.topics == "x" and config.retry.attempts == 3


def test_spark_conf_flags_add_to_the_file_table(tmp_path):
    path = tmp_path / "mirror.toml"
    path.write_text('[spark_conf]\n"spark.executor.memory" = "2g"\n"spark.ui.enabled" = "false"\n')
    args = build_parser().parse_args(["run", "--source", "a:9092", "--destination", "b:9092", "--topics", "t",
                                      "--spark-conf", "spark.executor.memory=4g", "--spark-conf", "spark.x=1"])
    config = load_config(path, overrides_from_args(args))
    assert config.spark_conf == {"spark.executor.memory": "4g", "spark.ui.enabled": "false", "spark.x": "1"}


def test_command_line_flags_map_onto_the_model():
    args = build_parser().parse_args([
        "run", "--source", "a:1", "--destination", "b:2", "--topics", "t.*", "--rename", "src.{topic}",
        "--compression", "zstd", "--once", "--max-bytes-per-trigger", "1000", "--spark-conf", "spark.x=1=2"])
    config = load_config(None, overrides_from_args(args))
    assert (config.source.bootstrap, config.rename, config.compression, config.once) == (("a:1",), "src.{topic}", "zstd", True)
    assert config.max_bytes_per_trigger == 1000 and config.spark_conf == {"spark.x": "1=2"}
    assert config.destination_topic("t1") == "src.t1"


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
    assert config.selects("orders.eu") and not config.selects("xorders")
    assert not config.selects("orders-tmp") and not config.selects("__consumer_offsets")


def test_kmirror_run_exits_2_on_bad_configuration(capsys):
    from mirror.cli import main

    assert main(["run", "--source", "nope", "--destination", "b:1", "--topics", "x"]) == 2


def test_the_configuration_reference_documents_every_key():
    from pathlib import Path

    from mirror.config import ClusterConfig, MirrorConfig, RetryConfig, SaslConfig, TlsConfig

    reference = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    for model in (MirrorConfig, ClusterConfig, RetryConfig, TlsConfig, SaslConfig):
        for name in model.model_fields:
            assert f"`{name}`" in reference or f"[{name}]" in reference, f"{model.__name__}.{name} is undocumented"


def test_the_deploy_example_is_a_valid_configuration():
    from pathlib import Path

    example = Path(__file__).parents[2] / "deploy" / "kmirror.example.toml"
    config = load_config(example)
    assert config.destination_topic("orders.eu") == "eu.orders.eu" and config.selects("payments")


def test_starting_offsets_take_a_time_as_iso_8601_or_epoch_milliseconds():
    base = {"source.bootstrap": "a:1", "destination.bootstrap": "b:1", "topics": "t"}
    assert load_config(None, {**base, "starting_offsets": "2026-11-23T08:00:00Z"}).starting_offsets == 1795420800000
    assert load_config(None, {**base, "starting_offsets": "2026-11-23T08:00:00"}).starting_offsets == 1795420800000
    assert load_config(None, {**base, "starting_offsets": "2026-11-23T09:00:00+01:00"}).starting_offsets == 1795420800000
    assert load_config(None, {**base, "starting_offsets": "1795420800000"}).starting_offsets == 1795420800000
    assert load_config(None, {**base, "starting_offsets": "latest"}).starting_offsets == "latest"
    for bad in ("yesterday", "-5", "2026-13-01"):
        with pytest.raises(ConfigError, match="starting_offsets"):
            load_config(None, {**base, "starting_offsets": bad})
