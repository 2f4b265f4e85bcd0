"""One suite, two sizes: how much work each fixed-work test does (kills, records, outages,
soaks, loads), in one table.

``./dev test`` (CI) runs every test at its **CI size**: every fault is still injected (at
least two kills where a test kills), and every verdict still comes from the same independent
reader; only the amount of work shrinks. ``./dev test --acceptance`` runs the same tests at
the size the issue that asked for them named: run it before resolving an issue that touches
the copy, a commit or a fault path. Go's ``testing.Short()`` and Kafka's system tests, kept
out of its unit build, split their suites the same way.

A test reads its size once, at import: ``SIZE = size("soak")``, then ``SIZE.outage_s``.
docs/testing.md lists the table (tests/test_sizes.py holds the two together).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType, SimpleNamespace
from typing import Mapping

__all__ = ["Sized", "SIZES", "size", "acceptance", "use_acceptance_sizes", "table"]


@dataclass(frozen=True)
class Sized:
    """One test's two sizes, each a few named numbers, and who asked for the larger one."""

    test: str
    """The test (node id, without parameters) that reads this size."""
    ci: Mapping[str, float]
    acceptance: Mapping[str, float]
    asked_by: str
    """The issue whose acceptance named the larger size."""

    def __post_init__(self) -> None:
        if set(self.ci) != set(self.acceptance):
            raise ValueError(f"{self.test}: the two sizes name different things: {sorted(self.ci)} and "
                             f"{sorted(self.acceptance)}")


SIZES: Mapping[str, Sized] = MappingProxyType({
    "crash.embedded": Sized(
        "tests/spark/test_exactly_once_crash.py::test_sigkills_of_the_whole_mirror_lose_and_duplicate_nothing[embedded]",
        {"kills": 2, "records": 50_000, "write_s_per_kill": 20},
        {"kills": 10, "records": 1_000_000, "write_s_per_kill": 30}, "issue 10"),
    "crash.kafka": Sized(
        "tests/spark/test_exactly_once_crash.py::test_sigkills_of_the_whole_mirror_lose_and_duplicate_nothing[kafka]",
        {"kills": 2, "records": 50_000, "write_s_per_kill": 20},
        {"kills": 10, "records": 1_000_000, "write_s_per_kill": 30}, "issue 34"),
    "crash.broker": Sized(
        "tests/spark/test_exactly_once_crash.py::test_a_destination_broker_killed_mid_transaction_loses_and_duplicates_nothing",
        {"records": 50_000}, {"records": 1_000_000}, "issue 14"),
    "crash.leader": Sized(
        "tests/spark/test_exactly_once_crash.py::test_the_real_destination_partition_leader_killed_mid_transaction_loses_and_duplicates_nothing",
        {"records": 50_000}, {"records": 1_000_000}, "issue 34"),
    "active_active": Sized(
        "tests/spark/test_active_active.py::test_two_jobs_mirroring_each_other_copy_each_record_once_per_cluster",
        {"load_s": 10}, {"load_s": 60}, "issue 37"),
    "failback": Sized(
        "tests/realkafka/test_real_failback.py::"
        "test_a_failover_and_a_failback_lose_nothing_copy_nothing_twice_and_move_the_group_exactly",
        {"records": 50_000}, {"records": 1_000_000}, "issue 71"),
    "soak": Sized(
        "tests/spark/test_soak.py::test_the_mirror_rides_out_restarts_outages_and_a_paused_destination",
        {"outage_s": 10, "rounds": 1}, {"outage_s": 60, "rounds": 3}, "issue 14"),
    "copy_ahead": Sized(
        "tests/spark/test_copy_ahead.py::test_sigkills_while_copiers_follow_a_written_source_lose_and_duplicate_nothing",
        {"kills": 2}, {"kills": 3}, "issue 36"),
    "whole_cluster": Sized(
        "tests/realkafka/test_real_whole_cluster.py::test_a_whole_cluster_is_copied_in_one_shot",
        {"topics": 1001, "nodes": 1}, {"topics": 2000, "nodes": 3}, "issue 69"),
    "leader_moves": Sized(
        "tests/realkafka/test_real_leader_moves.py::test_leader_moves_and_broker_restarts_on_both_clusters_lose_and_duplicate_nothing",
        {"faults": 4}, {"faults": 5}, "issue 34"),
})


_acceptance = False


def use_acceptance_sizes(on: bool) -> None:
    """Set by tests/conftest.py from ``--acceptance``, before any test module is imported."""
    global _acceptance
    _acceptance = on


def acceptance() -> bool:
    """Whether this run is the acceptance run (``./dev test --acceptance``)."""
    return _acceptance


def size(name: str) -> SimpleNamespace:
    """This run's size of ``name``: its numbers as attributes."""
    sized = SIZES[name]
    return SimpleNamespace(**(sized.acceptance if _acceptance else sized.ci))


def table() -> str:
    """The table as docs/testing.md shows it (tests/test_sizes.py holds the two together)."""
    def said(values: Mapping[str, float]) -> str:
        return ", ".join(f"{name} {value:,}" for name, value in values.items())

    rows = ["| size | test | CI | acceptance | asked by |", "|---|---|---|---|---|"]
    for name, sized in SIZES.items():
        rows.append(f"| `{name}` | `{sized.test}` | {said(sized.ci)} | {said(sized.acceptance)} | {sized.asked_by} |")
    return "\n".join(rows)
