"""Shared fixtures: record sets that exercise every field shape the formats allow, and the
copy's producer without a cluster, for its stamp."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kcodecs import Record

# Real Apache Kafka clusters as fixtures (tests/support/real_kafka.py); kmirror installed from
# its wheel, once per run (tests/support/installed_kmirror.py); a class-data archive for the
# Spark drivers of slow tests (tests/support/spark_archive.py); the time per folder after a run
# (tests/support/suite_timing.py).
pytest_plugins = ["real_kafka", "installed_kmirror", "spark_archive", "suite_timing"]

ACCEPTANCE_TIMEOUT_S = 3 * 3600
"""A test's limit under ``--acceptance`` (pyproject's ``timeout`` is the CI tier's)."""

REAL_KAFKA_TESTS = Path(__file__).parent / "realkafka"

# Every JVM the tests start (real Kafka brokers and their storage tool, MirrorMaker, Spark
# drivers of `kmirror run`) compiles with C1 only, as kmirror's own Spark JVMs do
# (mirror.spark.session.JVM_OPTIONS): C2 compiling for a JVM that lives a minute halves what a
# Kafka broker's start costs the two cores (10.5 -> 4.8 CPU s) and changes nothing it does.
# Each JVM notes "Picked up JAVA_TOOL_OPTIONS" on its stderr.
_C1_ONLY = "-XX:TieredStopAtLevel=1"
if _C1_ONLY not in os.environ.get("JAVA_TOOL_OPTIONS", ""):
    os.environ["JAVA_TOOL_OPTIONS"] = f"{os.environ.get('JAVA_TOOL_OPTIONS', '')} {_C1_ONLY}".strip()


def pytest_addoption(parser):
    parser.addoption("--acceptance", action="store_true",
                     help="run every fixed-work test at the size its issue asked for (tests/support/sizes.py, "
                     "docs/testing.md), with a longer per-test timeout; without it, at CI size")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Before the test modules are imported (they read their sizes then), and before
    pytest-timeout reads its limit."""
    from sizes import use_acceptance_sizes

    acceptance = config.getoption("acceptance")
    use_acceptance_sizes(acceptance)
    if acceptance and (config.option.timeout or 0) < ACCEPTANCE_TIMEOUT_S:
        config.option.timeout = ACCEPTANCE_TIMEOUT_S


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test may have been stopped inside a call to Spark's JVM: the worker's next
    Spark calls must not read that call's late answer (tests/support/jvm_calls.py)."""
    outcome = yield
    if outcome.get_result().failed:
        from jvm_calls import forget_interrupted_jvm_call

        forget_interrupted_jvm_call()


def pytest_collection_modifyitems(items):
    """Every test in tests/realkafka/ runs against real Apache Kafka: marker ``kafka``. (No
    conftest there: a second module named conftest would shadow this one for the tests that
    import helpers from it.)

    For pytest-xdist (``--dist loadfile``, see pyproject.toml): the modules with slow tests are
    collected first, the longest of them (:data:`LONGEST_FIRST`) first of all, so that their
    minutes overlap the many short tests rather than trail behind them on one worker at the
    end."""
    for item in items:
        if Path(str(item.fspath)).is_relative_to(REAL_KAFKA_TESTS):
            item.add_marker(pytest.mark.kafka)
    slow_modules = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}

    def order(item) -> tuple[int, bool]:
        module = item.nodeid.split("::")[0]
        rank = LONGEST_FIRST.index(module) if module in LONGEST_FIRST else len(LONGEST_FIRST)
        return rank, module not in slow_modules

    # A stable sort by module: a module's tests stay together and in their order, so that a
    # module-scoped fixture is still set up once (with or without xdist).
    items.sort(key=order)


LONGEST_FIRST = (
    "tests/spark/test_exactly_once_crash.py",
    "tests/spark/test_shipped_environment.py",
    "tests/spark/test_active_active.py",
    "tests/realkafka/test_real_verify.py",
    "tests/test_prometheus.py",
    "tests/realkafka/test_real_demo.py",
    "tests/realkafka/test_real_mm2_takeover.py",
    "tests/realkafka/test_real_leader_moves.py",
    "tests/spark/test_stop.py",
    "tests/spark/test_soak.py",
    "tests/spark/test_job.py",
)
"""The slow modules that took longest at CI size (90-250 s each on the 2-core machine,
2026-11-29), longest first: scheduled first, they end before the short ones do, as in
longest-processing-time-first scheduling. A stale entry costs balance, never a test."""


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
