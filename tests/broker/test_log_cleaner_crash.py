"""A crash at any moment of a clean loses no record that should be kept.

Every file-system change the cleaner makes (writes, renames, deletions) is a point where the
process may die. The test counts them in one clean, then for each point k replays the same
clean on a fresh copy of the data, kills it at change k (that change and every later one
raise, so no clean-up code runs, as after SIGKILL), abandons the open files, and reopens
the directory as a restarted broker does. The log must then hold every record the finished
clean would keep, nothing that was never written, in offset order; and a clean after the
restart must reach the same result as one that was never interrupted.
"""

from __future__ import annotations

import os
import pathlib
import shutil

from test_log_cleaner import cleaner_for, compacted, expected_after_clean, open_store, produce, stored, updates
from broker_helpers import ManualClock


class Killed(BaseException):
    """The process died here (BaseException, so no ``except Exception`` in the code under test sees it)."""


class Mutations:
    """Patches the calls that change files; raises :class:`Killed` from change ``kill_at`` on."""

    def __init__(self, monkeypatch, kill_at: int | None = None):
        self.count = 0
        self.kill_at = kill_at
        for owner, name in ((os, "rename"), (os, "replace"), (os, "unlink"), (os, "pwrite"), (os, "ftruncate"),
                            (os, "truncate"), (pathlib.Path, "unlink"), (pathlib.Path, "write_bytes")):
            monkeypatch.setattr(owner, name, self._wrap(getattr(owner, name)))

    def _wrap(self, function):
        def changed(*args, **kwargs):
            if self.kill_at is not None and self.count >= self.kill_at:
                raise Killed(f"killed at file change {self.count}")
            self.count += 1
            return function(*args, **kwargs)
        return changed


def prepared(path: pathlib.Path, clock: ManualClock):
    store = open_store(path)
    partition = compacted(store, **{"segment.bytes": "1200"})
    written = produce(partition, clock, updates(260, keys=12, tombstone_every=9))
    store.close()
    return written


def test_a_crash_at_any_file_change_of_a_clean_loses_nothing(tmp_path, monkeypatch):
    clock = ManualClock()
    pristine = tmp_path / "pristine"
    written = prepared(pristine, clock)

    def run(name: str, kill_at: int | None) -> tuple[pathlib.Path, int]:
        directory = tmp_path / name
        shutil.copytree(pristine, directory)
        store = open_store(directory)
        end = store.partition("t", 0).log.active_base_offset
        with monkeypatch.context() as patch:
            mutations = Mutations(patch, kill_at)
            try:
                cleaner_for(store, clock).clean_once()
            except Killed:
                pass
            else:
                assert kill_at is None, "the clean finished before the planned crash"
        for topic in store.topics.values():
            for partition in topic.partitions:
                partition.log.close_handles()
        return directory, end if kill_at is not None else mutations.count

    _, changes = run("uninterrupted", None)
    assert changes > 10  # cleaned files written, renamed twice, old segments deleted, checkpoint replaced
    full = expected_after_clean(written, open_store(tmp_path / "uninterrupted").partition("t", 0).log.active_base_offset)
    for kill_at in range(changes):
        directory, end = run(f"killed-{kill_at}", kill_at)
        store = open_store(directory)  # the restart: the loader settles .cleaned and .swap files
        partition = store.partition("t", 0)
        after_restart = stored(partition)
        assert set(full) <= set(after_restart) <= set(written), f"crash at change {kill_at}"
        assert [r[0] for r in after_restart] == sorted({r[0] for r in after_restart})
        assert not [p.name for p in directory.glob("t-0/*") if p.suffix in (".cleaned", ".swap")]
        cleaner_for(store, clock).clean_once()
        assert stored(partition) == full, f"crash at change {kill_at}: the next clean differs"
        store.close()
        shutil.rmtree(directory)
