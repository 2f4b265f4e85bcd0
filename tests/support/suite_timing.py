"""A pytest plugin that says where a run's time went: after the run, the wall time and a table
of the tests' time per folder (``tests/spark``, ``tests/realkafka``, ...), beside pytest's own
25 slowest (``--durations=25``, pyproject's addopts). CI prints it (``.ci/run``), so a suite
creeping back towards its budget shows in which folder.

Under pytest-xdist the workers' reports reach the controller, where this runs; a test's time
is its setup, call and teardown, so a module's shared fixture counts once, where it is set up.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import PurePosixPath

import pytest

_began = time.monotonic()
_seconds: dict[str, float] = defaultdict(float)
_tests: dict[str, set[str]] = defaultdict(set)


def _folder(nodeid: str) -> str:
    path = PurePosixPath(nodeid.split("::")[0])
    return str(path.parent) if len(path.parts) > 2 else f"{path.parent} (top level)"


def pytest_sessionstart(session) -> None:
    global _began
    _began = time.monotonic()


def pytest_runtest_logreport(report) -> None:
    folder = _folder(report.nodeid)
    _seconds[folder] += report.duration
    _tests[folder].add(report.nodeid)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter) -> None:
    if not _seconds:
        return
    write = terminalreporter.write_line
    terminalreporter.section("time per folder")
    write(f"{'folder':<34} {'tests':>6} {'seconds':>9}")
    for folder, seconds in sorted(_seconds.items(), key=lambda item: -item[1]):
        write(f"{folder:<34} {len(_tests[folder]):>6} {seconds:>9.1f}")
    write(f"{'all (summed over workers)':<34} {sum(map(len, _tests.values())):>6} {sum(_seconds.values()):>9.1f}")
    write(f"wall time: {time.monotonic() - _began:.0f} s")
