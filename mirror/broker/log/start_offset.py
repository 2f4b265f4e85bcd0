"""``<partition dir>/.kmirror_log_start_offset``: where DeleteRecords moved the log start offset.

Retention moves the log start with the segments it deletes, so the oldest segment's base
offset says where the log starts. DeleteRecords (Kafka's ``deleteRecordsOnLeader``) may move
it inside a segment, which nothing on disk records; Kafka keeps such offsets in its
``log-start-offset-checkpoint``, one per data directory. Ours is one small file per
partition, laid out as Kafka's ``CheckpointFile`` (version, number of entries, entries), its
one entry the offset alone, since the directory names the partition::

    0          version
    1          number of entries
    52731      the log start offset

Written whole when DeleteRecords moves the start (temporary file, fsync, rename, directory
fsync), so an acknowledged deletion survives power loss; Kafka writes its checkpoint only
every ``log.flush.start.offset.checkpoint.interval.ms``. A missing file means no deletion;
an unreadable one is logged and treated as missing, as the cleaner's checkpoint is: the
deleted records become readable again, nothing else is lost.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .files import LOG_START_OFFSET_FILE, fsync_dir

__all__ = ["read_log_start_offset", "write_log_start_offset"]

log = logging.getLogger(__name__)

_VERSION = 0


def read_log_start_offset(directory: Path) -> int:
    """The checkpointed log start offset of ``directory``; 0 if there is none."""
    path = directory / LOG_START_OFFSET_FILE
    try:
        lines = path.read_text().split()
    except FileNotFoundError:
        return 0
    try:
        if len(lines) != 3 or int(lines[0]) != _VERSION or int(lines[1]) != 1:
            raise ValueError(f"expected version {_VERSION}, 1 entry and an offset, got {lines}")
        offset = int(lines[2])
        if offset < 0:
            raise ValueError(f"negative offset {offset}")
        return offset
    except ValueError as exc:
        log.error("ignoring %s, which does not parse (%s): the log starts at its oldest segment", path, exc)
        return 0


def write_log_start_offset(directory: Path, offset: int) -> None:
    """Replace the checkpoint of ``directory`` with ``offset``, durably."""
    path = directory / LOG_START_OFFSET_FILE
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as out:
        out.write(f"{_VERSION}\n1\n{offset}\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    fsync_dir(directory)
