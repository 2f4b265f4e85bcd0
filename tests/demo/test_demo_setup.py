"""The demo's setup without Spark: its command line refuses what it cannot use, and the source
it fills holds what the demo claims (records, keys, codecs, LogAppendTime), read back with
librdkafka, a reader independent of kmirror's."""

from __future__ import annotations

import argparse
from dataclasses import replace

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME
from librdkafka_reader import read_values

from mirror.broker import EmbeddedBroker
from mirror.demo import cli
from mirror.demo.fill import DEMO_TOPICS, DemoError, fill_source


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(argv)


def test_defaults_and_too_few_records_are_refused(capsys):
    args = parse()
    assert (args.records, args.keep, args.master) == (cli.DEFAULT_RECORDS, None, "local[2]")
    with pytest.raises(SystemExit):
        parse("--records", "399")
    assert "needs at least 400 (100 per topic)" in capsys.readouterr().err


def test_keep_must_be_new_or_empty(tmp_path, caplog):
    (tmp_path / "old").write_text("x")
    assert cli.run(parse("--keep", str(tmp_path))) == cli.EXIT_UNUSABLE
    assert cli.run(parse("--keep", str(tmp_path / "old"))) == cli.EXIT_UNUSABLE
    assert "not a new or empty directory" in caplog.text


@pytest.mark.interop
def test_fill_writes_what_the_demo_claims(tmp_path):
    lines: list[str] = []
    with EmbeddedBroker(tmp_path / "src") as src:
        fill_source(src.bootstrap, 100, say=lines.append)
        fill_source(src.bootstrap, 50, start=100, say=lines.append)
        data = {topic.name: read_values(src.bootstrap, topic.name, topic.partitions,
                                        take=lambda m: (m.key(), m.value(), m.timestamp()[0]))
                for topic in DEMO_TOPICS}
    for topic in DEMO_TOPICS:
        records = [record for partition in data[topic.name].values() for record in partition]
        assert (len(data[topic.name]), len(records)) == (topic.partitions, 150)
        keys = {key for key, _, _ in records}
        assert keys == ({None} if not topic.keys else {b"customer-%04d" % k for k in range(min(topic.keys, 150))})
        appended = {kind for _, _, kind in records} == {TIMESTAMP_LOG_APPEND_TIME}
        assert appended == (topic.configs.get("message.timestamp.type") == "LogAppendTime")
    orders = [value for partition in data["keyed.orders"].values() for key, value, _ in partition
              if key == b"customer-0070"]
    assert orders == [b'{"key":"customer-0070","seq":0,"amount":590.70,"status":"placed"}']
    assert any("nokeys.kmirror" in line and "lz4" in line and "zstd" in line for line in lines)


@pytest.mark.interop
@pytest.mark.parametrize("broker_codec, held", [("gzip", "gzip"), ("uncompressed", "none")])
def test_fill_stops_when_the_source_holds_another_codec_than_claimed(tmp_path, broker_codec, held):
    """The topic's compression.type makes the broker rewrite librdkafka's snappy batches."""
    rewritten = replace(DEMO_TOPICS[1], configs={"compression.type": broker_codec})
    with EmbeddedBroker(tmp_path / "src") as src, pytest.raises(DemoError, match=f"holds {held} batches, not snappy"):
        fill_source(src.bootstrap, 100, topics=(rewritten,), say=lambda line: None)
