"""CPU seconds and peak RSS of this process and all its descendants, from Linux's ``/proc``.

The Spark mode copies in a JVM and in Python workers that this process started, which
``getrusage`` cannot see while they live. A :class:`TreeMeter` adds up, over the tree,
user + system time plus the time of children already reaped (``/proc/PID/stat`` fields
14-17), at the start and at the end, and samples the summed RSS every 0.2 s for the peak.
A process that ends mid-window is counted through its parent's reaped-children time.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

__all__ = ["TreeMeter", "tree_pids", "process_tree", "tree_rss", "parse_stat"]

_PROC = Path("/proc")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def parse_stat(text: str) -> tuple[int, float]:
    """``(ppid, cpu seconds)`` from a ``/proc/PID/stat`` line; the name may hold spaces and ')'."""
    fields = text[text.rindex(")") + 2 :].split()
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return ppid, (utime + stime + cutime + cstime) / _TICKS


def _stats() -> dict[int, tuple[int, float]]:
    out = {}
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            try:
                out[int(entry.name)] = parse_stat((entry / "stat").read_text())
            except (OSError, ValueError):
                continue  # exited while we looked
    return out


def tree_pids(parents: dict[int, int], root: int) -> set[int]:
    """``root`` and every process below it, given each process's parent."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def process_tree(root: int) -> set[int]:
    """``root`` and every process below it now, whatever their process groups and sessions
    (Spark's JVM runs in a session of its own): what a lost machine, or systemd's
    ``KillMode=control-group``, takes with the job."""
    return tree_pids({pid: stat[0] for pid, stat in _stats().items()}, root)


def _tree_cpu(root: int) -> float:
    stats = _stats()
    return sum(stats[pid][1] for pid in tree_pids({pid: s[0] for pid, s in stats.items()}, root) if pid in stats)


def tree_rss(root: int) -> int:
    """The summed RSS of ``root`` and its descendants now, in bytes (the soak test samples it over a run)."""
    total = 0
    for pid in process_tree(root):
        try:
            total += int((_PROC / str(pid) / "statm").read_text().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            continue
    return total


class TreeMeter:
    """``with TreeMeter() as m: ...`` then ``m.cpu_s`` and ``m.peak_rss_bytes`` of the tree."""

    def __init__(self, root: int | None = None, interval_s: float = 0.2):
        self.root = root or os.getpid()
        self.interval_s = interval_s
        self.cpu_s = 0.0
        self.peak_rss_bytes = 0
        self._start = 0.0
        self._done = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.peak_rss_bytes = max(self.peak_rss_bytes, tree_rss(self.root))
            if self._done.wait(self.interval_s):
                return

    def __enter__(self) -> "TreeMeter":
        self._start = _tree_cpu(self.root)
        self._sampler.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._sampler.join()
        self.cpu_s = _tree_cpu(self.root) - self._start
