"""``kmirror bench mirror --source-rtt-ms``: the source really stands behind the latency proxy.

Kafka clients connect to the address a broker advertises, not to the one they bootstrapped
from; so the source must advertise the proxy, or every connection after the first would go
around it. Checked from the metadata a client (librdkafka) gets, and from a round trip timed
through it (a lower bound only: the delay is injected on purpose)."""

from __future__ import annotations

import argparse
import statistics
import time

import pytest
from confluent_kafka.admin import AdminClient

from mirror.bench import mirror_bench

pytestmark = pytest.mark.slow


def _settings(*options: str) -> mirror_bench.Settings:
    parser = argparse.ArgumentParser()
    mirror_bench.add_arguments(parser)
    return mirror_bench.settings_from(parser.parse_args(["--codecs", "lz4", "--batch-kib", "16", *options]))


@pytest.mark.parametrize("cluster", ["embedded", pytest.param("kafka", marks=pytest.mark.kafka)])
def test_every_connection_to_the_source_crosses_the_proxy(tmp_path, cluster):
    settings = _settings("--source-rtt-ms", "60", "--cluster", cluster)
    with mirror_bench._clusters(settings, tmp_path) as (source, destination):
        admin = AdminClient({"bootstrap.servers": source})
        metadata = admin.list_topics(timeout=30)
        assert [f"{b.host}:{b.port}" for b in metadata.brokers.values()] == [source]  # the proxy, advertised
        direct = AdminClient({"bootstrap.servers": destination})
        rounds = []
        for client in (admin, direct):
            times = []
            for _ in range(5):
                began = time.perf_counter()
                client.list_topics(timeout=30)
                times.append(time.perf_counter() - began)
            rounds.append(statistics.median(times))
        assert rounds[0] >= 0.060 and rounds[0] - rounds[1] >= 0.050, rounds


def test_the_rtt_option_is_checked():
    with pytest.raises(mirror_bench.BenchError, match="negative"):
        _settings("--source-rtt-ms", "-1")
    with pytest.raises(mirror_bench.BenchError, match="proxy"):
        _settings("--source-rtt-ms", "50", "--source", "h:1", "--destination", "h:2")
