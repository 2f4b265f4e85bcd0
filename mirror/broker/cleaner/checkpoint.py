"""``<data_dir>/cleaner-offset-checkpoint``: where each compacted partition's dirty section starts.

Kafka's ``OffsetCheckpointFile`` text format, so Kafka's tools read it::

    0                  version
    2                  number of entries
    orders 0 52731     topic, partition, first dirty offset
    orders 1 0

Rewritten whole after each clean (temporary file, fsync, rename, directory fsync). A
missing file means nothing was cleaned yet; an unreadable one is logged and treated as
missing: cleaning from the log start again costs time but never loses a record.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from ..log.files import fsync_dir

__all__ = ["CleanerCheckpoint", "CHECKPOINT_FILE"]

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
_VERSION = 0


class CleanerCheckpoint:
    def __init__(self, data_dir: Path):
        self.path = data_dir / CHECKPOINT_FILE
        self._offsets = self._read()
        self._writing = threading.Lock()
        """The cleaner's thread updates, the broker's loop forgets a deleted topic."""

    def _read(self) -> dict[tuple[str, int], int]:
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return {}
        try:
            if int(lines[0]) != _VERSION:
                raise ValueError(f"version {lines[0]}, expected {_VERSION}")
            count = int(lines[1])
            entries = [line.rsplit(" ", 2) for line in lines[2:2 + count]]
            if len(entries) != count or any(len(entry) != 3 for entry in entries):
                raise ValueError(f"{len(entries)} well-formed entries, expected {count}")
            return {(topic, int(partition)): int(offset) for topic, partition, offset in entries}
        except (ValueError, IndexError) as exc:
            log.error("ignoring %s, which does not parse (%s): compacted partitions are cleaned from their start",
                      self.path, exc)
            return {}

    def first_dirty_offset(self, topic: str, partition: int) -> int | None:
        return self._offsets.get((topic, partition))

    def update(self, topic: str, partition: int, offset: int) -> None:
        with self._writing:
            self._offsets = {**self._offsets, (topic, partition): offset}
            self._write()

    def forget(self, topic: str) -> None:
        """Drop a deleted topic's entries, as Kafka does on deletion: a topic created again
        under the name starts dirty from its log start, not from where the old one was clean."""
        with self._writing:
            kept = {key: offset for key, offset in self._offsets.items() if key[0] != topic}
            if len(kept) != len(self._offsets):
                self._offsets = kept
                self._write()

    def _write(self) -> None:
        lines = [str(_VERSION), str(len(self._offsets))]
        lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(self._offsets.items())]
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as out:
            out.write("\n".join(lines) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)
