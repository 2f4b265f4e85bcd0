"""``kmirror run --mirrormaker2-config``: the command's side, no cluster needed. A file with keys
kmirror cannot honour is reported one line per key and the job is not started (exit 2, Spark
never imported); ``--print-config`` prints a TOML file that loads back to the same job; the
``--config`` file and the flags win over the MirrorMaker 2 file."""

from __future__ import annotations

import logging
import sys

import pytest

from mirror.cli import main
from mirror.config import load_config

MM2 = """\
clusters = A, B
A.bootstrap.servers = a1:9092, a2:9092
B.bootstrap.servers = b1:9092
A->B.enabled = true
A->B.topics = orders.*, payments
B.exactly.once.source.support = enabled
sync.group.offsets.enabled = true
A->B.groups = billing.*
"""


@pytest.fixture
def mm2_file(tmp_path):
    path = tmp_path / "mm2.properties"
    path.write_text(MM2)
    return path


def test_unsupported_keys_are_listed_one_line_each_and_the_job_is_not_started(tmp_path, mm2_file, caplog):
    mm2_file.write_text(MM2 + "replication.policy.class = com.example.MyPolicy\nA->B.topic.filter.class = x.Y\n"
                        "tpoics = typo\n")
    sys.modules.pop("mirror.spark.job", None)
    with caplog.at_level(logging.INFO, logger="kmirror"):
        assert main(["run", "--mirrormaker2-config", str(mm2_file), "--checkpoint", str(tmp_path / "ck")]) == 2
    refused = [r.getMessage() for r in caplog.records if "cannot honour" in r.getMessage()]
    assert len(refused) == 3
    for key in ("replication.policy.class", "A->B.topic.filter.class", "tpoics"):
        assert sum(key in line for line in refused) == 1, (key, refused)
    assert "mirror.spark.job" not in sys.modules  # nothing was started
    assert not (tmp_path / "ck").exists()


def test_print_config_shows_the_job_as_toml_that_loads_back(tmp_path, mm2_file, capsys):
    assert main(["run", "--mirrormaker2-config", str(mm2_file), "--print-config"]) == 0
    printed = tmp_path / "printed.toml"
    printed.write_text(capsys.readouterr().out)
    config = load_config(printed)
    assert config.clusters.source.bootstrap == ("a1:9092", "a2:9092")
    assert config.clusters.destination_topic("orders.eu") == "A.orders.eu"  # MM2's default policy
    assert config.clusters.selects("payments") and not config.clusters.selects("payments2")
    assert config.delivery.mode == "exactly-once" and config.takeover.exactly_once and config.takeover.mirrormaker2
    assert config.sync.groups is not None


def test_the_config_file_and_the_flags_win_over_the_mirrormaker2_file(tmp_path, mm2_file, capsys):
    override = tmp_path / "kmirror.toml"
    override.write_text('[clusters]\ntopics = "orders"\n[routing]\ncompression = "zstd"\n')
    assert main(["run", "--mirrormaker2-config", str(mm2_file), "--config", str(override), "--delivery",
                 "at-least-once", "--print-config"]) == 0
    printed = tmp_path / "printed.toml"
    printed.write_text(capsys.readouterr().out)
    config = load_config(printed)
    assert config.clusters.topics == "orders" and config.routing.compression == "zstd"
    assert config.delivery.mode == "at-least-once"
    assert config.clusters.source.bootstrap == ("a1:9092", "a2:9092")  # the rest still MM2's


def test_flow_needs_a_mirrormaker2_file_and_an_unknown_flow_is_named(tmp_path, mm2_file, caplog):
    with caplog.at_level(logging.ERROR, logger="kmirror"):
        assert main(["run", "--source", "a:1", "--destination", "b:1", "--topics", "t", "--flow", "A->B"]) == 2
        assert main(["run", "--mirrormaker2-config", str(mm2_file), "--flow", "B->C", "--print-config"]) == 2
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "--flow names a MirrorMaker 2 flow" in messages and "B->C" in messages
