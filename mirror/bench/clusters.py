"""The two clusters a bench copies between: embedded brokers, each a process of its own (what
``kmirror broker`` runs), or real Apache Kafka (KRaft, one node each, the newest pinned
version, fetched with Maven on first use)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

__all__ = ["bench_clusters", "cluster_name"]


@contextlib.contextmanager
def bench_clusters(kind: str, work: Path, *, destination_nodes: int = 1, source_nodes: int = 1,
                   heap_mb: int = 512) -> Iterator[tuple[str, str]]:
    """``(source, destination)`` bootstraps of two new clusters of ``kind`` ("embedded" or
    "kafka") in ``work``, stopped when the block ends. ``destination_nodes`` or
    ``source_nodes`` 3 (real Kafka only): three brokers, replication factor 3,
    ``min.insync.replicas`` 2, as production clusters are; ``heap_mb``: each Kafka node's heap."""
    if kind == "kafka":
        from ..realkafka import KafkaCluster

        with KafkaCluster(work / "source-kafka", nodes=source_nodes, heap_mb=heap_mb) as src, \
                KafkaCluster(work / "destination-kafka", nodes=destination_nodes, heap_mb=heap_mb) as dst:
            yield src.bootstrap, dst.bootstrap
        return
    if destination_nodes != 1 or source_nodes != 1:
        raise ValueError("an embedded destination is one broker: three nodes are real Kafka's (--cluster kafka)")
    from ..broker import BrokerProcess

    brokers = [BrokerProcess(work / "source"), BrokerProcess(work / "destination")]
    try:
        for broker in brokers:
            broker.start()
        yield brokers[0].bootstrap, brokers[1].bootstrap
    finally:
        for broker in brokers:
            if broker.process is not None and broker.process.poll() is None:
                broker.terminate()


def cluster_name(kind: str) -> str:
    """How a bench's report names the clusters of ``kind``."""
    if kind == "embedded":
        return "embedded brokers"
    from ..realkafka import KAFKA_4

    return f"Apache Kafka {KAFKA_4.version} (KRaft)"
