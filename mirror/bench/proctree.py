"""CPU seconds and peak RSS of this process and all its descendants, from Linux's ``/proc``.

The Spark mode copies in a JVM and in Python workers that this process started, which
``getrusage`` cannot see while they live. A :class:`TreeMeter` samples the tree every 0.2 s
and adds up each process's own user + system time since the sample before
(``/proc/PID/stat`` fields 14-15; a process first seen in the window counts from its start),
and the summed RSS for the peak. Differences of tree totals would not do: a process that
ends under a parent outside the tree (a daemon's, re-parented to init, as Spark's Python
workers and kmirror's copiers are) would take its whole CPU time out of the total, and the
meter once reported an idle job at -14% of a core. A process that ends between two samples
loses what it used since the last one.
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
    """``(ppid, cpu seconds)`` from a ``/proc/PID/stat`` line: the process's own user + system
    time (not its reaped children's); the name may hold spaces and ')'."""
    fields = text[text.rindex(")") + 2 :].split()
    ppid = int(fields[1])
    utime, stime = (int(f) for f in fields[11:13])
    return ppid, (utime + stime) / _TICKS


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


def _tree_cpu(root: int) -> dict[int, float]:
    """Each process of the tree: its own CPU seconds so far."""
    stats = _stats()
    return {pid: stats[pid][1] for pid in tree_pids({pid: s[0] for pid, s in stats.items()}, root) if pid in stats}


def tree_rss(root: int) -> int:
    """The summed RSS of ``root`` and its descendants now, in bytes (the soak test samples it over a run)."""
    total = 0
    for pid in process_tree(root):
        try:
            total += int((_PROC / str(pid) / "statm").read_text().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            continue
    return total


def _command(pid: int) -> str:
    """The process's command line, its arguments joined by spaces ("" once it has exited)."""
    try:
        return (_PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


class TreeMeter:
    """``with TreeMeter() as m: ...`` then ``m.cpu_s`` and ``m.peak_rss_bytes`` of the tree."""

    def __init__(self, root: int | None = None, interval_s: float = 0.2):
        self.root = root or os.getpid()
        self.interval_s = interval_s
        self.cpu_s = 0.0
        self.cpu_by_command: dict[str, float] = {}
        """The same CPU split by each process's command line (how a profile of a job's processes
        tells its driver, JVM, workers and copiers apart)."""
        self.peak_rss_bytes = 0
        self._last: dict[int, float] = {}
        self._done = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.peak_rss_bytes = max(self.peak_rss_bytes, tree_rss(self.root))
            if self._done.wait(self.interval_s):
                return
            self._add_cpu()

    def _add_cpu(self) -> None:
        """Each process's own CPU since the last sample (all of it for one not seen before)."""
        now = _tree_cpu(self.root)
        for pid, cpu in now.items():
            used = max(0.0, cpu - self._last.get(pid, 0.0))
            self.cpu_s += used
            if used:
                command = _command(pid)
                self.cpu_by_command[command] = self.cpu_by_command.get(command, 0.0) + used
        self._last = now

    def __enter__(self) -> "TreeMeter":
        self._last = _tree_cpu(self.root)
        self._sampler.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._sampler.join()
        self._add_cpu()
