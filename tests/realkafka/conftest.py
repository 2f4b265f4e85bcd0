"""Every test in this directory runs against real Apache Kafka: marker ``kafka``. The fixtures
are in ``tests/real_kafka.py`` (a plugin, so other directories have them too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from real_kafka import kafka_tls  # noqa: F401  (tests here import it from conftest too)

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items):
    for item in items:
        if Path(str(item.fspath)).is_relative_to(HERE):
            item.add_marker(pytest.mark.kafka)
