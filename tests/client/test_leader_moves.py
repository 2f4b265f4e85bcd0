"""Leadership moves while the copy runs: the destination answers NOT_LEADER_OR_FOLLOWER to
produce requests for a while, and the source to fetch requests. The data plane drops the
cached leaders, re-reads metadata, retries, and the destination ends with every record once
and in order (read back with librdkafka)."""

from __future__ import annotations

import pytest
from not_leader import NotLeaderForAWhile
from test_data_plane import PARTITIONS, PATIENT, _copy, _fill, _read_confluent

from mirror.broker import EmbeddedBroker
from mirror.kafka import KafkaClient


@pytest.fixture
def clusters(tmp_path):
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst:
        with KafkaClient(src.bootstrap, retry=PATIENT) as source, \
                KafkaClient(dst.bootstrap, retry=PATIENT, request_timeout_s=5) as destination:
            yield src, dst, source, destination


@pytest.mark.parametrize("moved", ["destination", "source"])
def test_a_leader_move_mid_copy_refreshes_metadata_and_keeps_order(clusters, monkeypatch, moved):
    src, dst, source, destination = clusters
    produced = _fill(source, "moves", batches=30, per_batch=20)
    broker, api = (dst, "produce") if moved == "destination" else (src, "fetch")
    hook = NotLeaderForAWhile(broker, api, "moves").install(monkeypatch)
    stats = _copy(src, source, destination, "moves", fetch_max_bytes=16 * 1024)
    assert hook.refused == hook.count, f"only {hook.refused} {api} requests refused: the copy ended too soon"
    assert hook.metadata_after_refusal >= 1, "the client retried without re-reading metadata"
    assert sum(r.counters.total_records for r in stats.ranges) == sum(map(len, produced.values()))
    got = _read_confluent(dst.bootstrap, "moves", {p: len(v) for p, v in produced.items()})
    for p in range(PARTITIONS):
        assert got[p] == produced[p], f"partition {p}: order or content differs"
