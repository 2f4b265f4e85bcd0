"""Shared fixtures: record sets that exercise every field shape the formats allow, and the
copy's producer without a cluster, for its stamp."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcodecs import Record

pytest_plugins = ["real_kafka"]  # real Apache Kafka clusters as fixtures (tests/support/real_kafka.py)

REAL_KAFKA_TESTS = Path(__file__).parent / "realkafka"


def pytest_configure(config):
    # Registered here too, so that --strict-markers accepts it when pytest-xdist is disabled.
    config.addinivalue_line("markers", "xdist_group(name): tests pytest-xdist runs on one worker (--dist loadgroup)")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads xdist_group marks
def pytest_collection_modifyitems(items):
    """Every test in tests/realkafka/ runs against real Apache Kafka: marker ``kafka``. (No
    conftest there: a second module named conftest would shadow this one for the tests that
    import helpers from it.)

    For pytest-xdist (``--dist loadgroup``, see pyproject.toml): tests that share a module's
    fixture (clusters, an installed wheel: what is expensive is module-scoped) run on one
    worker, so it is set up once; and the modules with slow tests come first, so that their
    minutes overlap the many short tests rather than trail behind them."""
    for item in items:
        if Path(str(item.fspath)).is_relative_to(REAL_KAFKA_TESTS):
            item.add_marker(pytest.mark.kafka)
        if _uses_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    slow_modules = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    # A stable sort by module: a module's tests stay together and in their order, so that a
    # module-scoped fixture is still set up once in a run without xdist.
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow_modules)


def _uses_a_module_fixture(item) -> bool:
    fixtures = getattr(item, "_fixtureinfo", None)
    if fixtures is None:
        return False
    return any(definitions and definitions[-1].scope in ("module", "package", "class") and not name.startswith("_")
               for name, definitions in fixtures.name2fixturedefs.items())

MAGIC_CODECS = [
    (magic, codec)
    for magic in (0, 1, 2)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd")
    if not (codec == "zstd" and magic < 2)
]
"""Every magic x codec pair Kafka allows (zstd needs magic 2)."""


def sample_records(magic: int, count: int = 20, base_ts: int = 1_700_000_000_000) -> list[Record]:
    """Keys, null keys, null values, empty values and (v2) headers with null values, mixed."""
    records = []
    for i in range(count):
        key = None if i % 3 == 0 else f"key-{i % 7}".encode()
        value = None if i % 5 == 4 else (b"" if i % 11 == 10 else (b"value-%d-" % i) * (i + 1))
        headers = []
        if magic == 2 and i % 2:
            headers = [("h1", b"x" * i), ("trace-\u00e9", None)]
        records.append(Record(key=key, value=value, timestamp=base_ts + i * 7 - (i % 4), headers=headers))
    return records


@pytest.fixture(params=MAGIC_CODECS, ids=lambda mc: f"v{mc[0]}-{mc[1]}")
def magic_codec(request) -> tuple[int, str]:
    return request.param


class _NoCluster:
    """What a producer given its identity asks of its client before sending: nothing but a name."""

    bootstrap = "nowhere:9092"


def unconnected_producer(producer_id: int):
    """The copy's :class:`~mirror.kafka.IdempotentProducer` with ``producer_id`` (epoch 0) and
    no cluster: :meth:`enqueue` stamps a batch as the copy's producer does, and nothing is
    sent until :meth:`send_ready`, which these tests never call."""
    from mirror.kafka import IdempotentProducer

    return IdempotentProducer(_NoCluster(), identity=(producer_id, 0))
