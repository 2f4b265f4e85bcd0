"""The protocol versions kmirror's client negotiates with each broker it is tested against,
held to the table in docs/architecture.md ("Kafka versions tested"), so the table stays true.

Kafka 4.0 removed old versions of many APIs (KIP-896); kmirror must still find a version it
speaks for every request it sends.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mirror.broker import EmbeddedBroker
from kafka.protocol.consumer import FetchRequest

from mirror.kafka.broker_connection import SPOKEN, BrokerConnection
from mirror.protocol.fetch import FETCH_TOPIC_IDS_SINCE
from mirror.realkafka import KAFKA_3, KAFKA_4

pytestmark = pytest.mark.slow

ARCHITECTURE = Path(__file__).parents[2] / "docs" / "architecture.md"


def _documented() -> dict[str, dict[str, int]]:
    """The table's rows: API name -> {column heading: version}."""
    text = ARCHITECTURE.read_text()
    table = text[text.index("| API | "):]
    lines = [line for line in table.splitlines()[:40] if line.startswith("|")]
    headings = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = {heading: int(re.sub(r"\D", "", cell)) for heading, cell in zip(headings[1:], cells[1:])}
    return rows


def _negotiated(bootstrap: str) -> dict[str, int]:
    connection = BrokerConnection(bootstrap.split(",")[0], client_id="versions-test", timeout_s=30)
    try:
        negotiated = {cls.__name__.removesuffix("Request"): connection.version_of(cls) for cls in SPOKEN}
        # The fetcher's own encoder names topics by id where the broker speaks it (Fetch v13).
        negotiated["Fetch by topic id"] = connection.version_of(FetchRequest, FETCH_TOPIC_IDS_SINCE)
        return negotiated
    finally:
        connection.close()


@pytest.mark.parametrize("column", ["Kafka 4.4.0", "Kafka 3.9.2", "embedded"])
def test_the_documented_versions_are_the_negotiated_ones(column, start_kafka, tmp_path):
    if column == "embedded":
        with EmbeddedBroker(tmp_path / "embedded") as broker:
            negotiated = _negotiated(broker.bootstrap)
    else:
        cluster = start_kafka(distribution=KAFKA_4 if column == "Kafka 4.4.0" else KAFKA_3)
        try:
            negotiated = _negotiated(cluster.bootstrap)
        finally:
            cluster.stop()
    documented = {api: row[column] for api, row in _documented().items()}
    assert documented == negotiated
