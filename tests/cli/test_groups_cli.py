"""``kmirror groups translate`` without a mirror run: its options, its table, and the normal
errors (no --groups, an unknown group, no offset syncs, an unreachable cluster) as one line and
exit code 2, never a traceback. The translation itself, through a Spark copy and librdkafka
consumers on both sides, is in tests/spark/test_groups_translate.py."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from source_groups import consume_and_commit, fill

from mirror.broker import EmbeddedBroker
from mirror.cli import build_parser
from mirror.engine.group_sync import GroupTranslation
from mirror.engine.offset_syncs import Precision, SyncEntry, Translation
from mirror.engine.copied import copy_frontier
from mirror.groups_cli import destinations_of, rows, table
from mirror.kafka import TopicPartition

REPO = Path(__file__).parents[2]


def _translate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirror.cli", "groups", "translate", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def _one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    return line


def test_help_lists_the_options_it_uses_and_the_jobs_command_line_is_accepted(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["groups", "translate", "--help"])
    shown = capsys.readouterr().out
    for option in ("--source", "--destination", "--topics", "--groups", "--name", "--checkpoint", "--config",
                   "--destination-tls-ca-file", "--source-sasl-password-env", "--apply"):
        assert option in shown
    for option in ("--once", "--master", "--partitioning", "--spark-conf", "--delivery"):
        assert option not in shown
    # `kmirror run`'s own flags work unchanged, so the job's command line can be reused.
    args = build_parser().parse_args(["groups", "translate", "--source", "a:1", "--destination", "b:2", "--topics",
                                      "t", "--groups", "g", "--once", "--master", "local[1]", "--apply"])
    assert args.apply and args.streaming__once and args.sync__groups == "g"


def test_without_groups_it_is_a_usage_error():
    line = _one_error_line(_translate("--source", "a:1", "--destination", "b:2", "--topics", "t"))
    assert line.endswith("groups translate needs --groups REGEX (or [sync] groups in the --config file)")


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    """Two embedded brokers; the source has topic orders, and group billing read 30 of it."""
    root = tmp_path_factory.mktemp("groups-cli")
    with EmbeddedBroker(root / "src") as src, EmbeddedBroker(root / "dst") as dst:
        fill(src.bootstrap, "orders", 2, 40)
        consume_and_commit(src.bootstrap, "billing", "orders", 2, 30)
        yield src, dst


def _clusters_args(clusters, *more: str) -> list[str]:
    src, dst = clusters
    return ["--source", src.bootstrap, "--destination", dst.bootstrap, "--topics", "orders", *more]


def test_a_group_the_source_does_not_have_is_named(clusters):
    line = _one_error_line(_translate(*_clusters_args(clusters, "--name", "failover", "--groups", "bill")))
    assert line.endswith("no consumer group at the source matches --groups 'bill' (a whole-name match)")


def test_no_offset_syncs_yet_says_which_topic_and_why(clusters):
    line = _one_error_line(_translate(*_clusters_args(clusters, "--name", "failover", "--groups", "billing")))
    assert "no offset syncs on the destination: kmirror-offset-syncs.failover does not exist" in line
    assert "give its --name, or its --checkpoint" in line
    _, dst = clusters
    admin = KafkaAdminClient(bootstrap_servers=dst.bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic("kmirror-offset-syncs.started", 1, 1)])
    finally:
        admin.close()
    line = _one_error_line(_translate(*_clusters_args(clusters, "--name", "started", "--groups", "billing")))
    assert "kmirror-offset-syncs.started is empty" in line


def test_an_unreachable_destination_ends_in_one_line_after_the_retries(clusters, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]  # nothing listens once the socket is closed
    config = tmp_path / "job.toml"
    config.write_text("[retry]\nattempts = 2\ninitial_backoff_s = 0.05\n")
    src, _ = clusters
    done = _translate("--config", str(config), "--source", src.bootstrap, "--destination", f"127.0.0.1:{closed}",
                      "--topics", "orders", "--groups", "billing")
    assert f"cluster 127.0.0.1:{closed} unreachable" in _one_error_line(done)


S0, S1, S2 = (TopicPartition("orders", p) for p in range(3))
D0, D1 = TopicPartition("mirror.orders", 0), TopicPartition("mirror.orders", 1)


def test_the_table_has_a_row_per_source_and_destination_partition_and_dashes_for_what_is_not_translated():
    # by-key: orders/0 and orders/1 both feed both destination partitions; orders/2 was never copied.
    entries = [SyncEntry(S0, 0, 9, D0, 0, 4, False), SyncEntry(S0, 0, 9, D1, 0, 6, False),
               SyncEntry(S1, 0, 4, D0, 4, 7, False), SyncEntry(S1, 0, 4, D1, 6, 8, False)]
    translation = GroupTranslation(
        "billing", {S0: 10, S1: 7, S2: 0},
        {D0: Translation(7, Precision.CONSERVATIVE, True), D1: Translation(8, Precision.CONSERVATIVE, True)})
    lines = rows(translation, destinations_of(entries), copy_frontier(entries, {S1: 5}))
    assert table(lines).splitlines() == [
        "GROUP    TOPIC   PARTITION  SOURCE-OFFSET  DESTINATION-TOPIC  DESTINATION-PARTITION  DESTINATION-OFFSET  "
        "PRECISION     COPIED",
        "billing  orders  0          10             mirror.orders      0                      7                   "
        "conservative  yes",
        "billing  orders  0          10             mirror.orders      1                      8                   "
        "conservative  yes",
        "billing  orders  1          7              mirror.orders      0                      7                   "
        "conservative  no",
        "billing  orders  1          7              mirror.orders      1                      8                   "
        "conservative  no",
        "billing  orders  2          0              -                  -                      -                   -"
        "             no",
    ]


def test_the_copy_frontier_counts_markers_the_offsets_topic_saw_past_the_last_sync():
    entries = [SyncEntry(S0, 0, 9, D0, 0, 10, True), SyncEntry(S0, 10, 19, D0, 11, 21, True)]
    assert copy_frontier(entries, {}) == {S0: 20}
    assert copy_frontier(entries, {S0: 21, S1: 3}) == {S0: 21, S1: 3}
    assert copy_frontier(entries, {S0: 15}) == {S0: 20}
