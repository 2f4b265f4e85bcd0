"""What one bench worker runs: :class:`ModeRun`, written by the bench driver as JSON.

It lives apart from :mod:`.worker` so the copiers (:mod:`.copiers`, :mod:`.peers`,
:mod:`.mirrormaker`, :mod:`.kmirror_run`) can take the spec without importing the worker
that dispatches to them: the worker imports the copiers, never the other way round.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

__all__ = ["ModeRun"]


@dataclass(frozen=True)
class ModeRun:
    """Everything a worker needs to run one mode once; travels as JSON."""

    mode: str
    source: str
    destination: str
    source_topic: str
    destination_topic: str
    end_offsets: tuple[int, ...]
    """Per source partition: copy offsets ``[0, end)``."""
    destination_partitions: int
    codec: str
    fetch_max_bytes: int
    work_dir: str
    profile: bool = False
    copy_tasks: int | None = None
    """The Spark mode's ``copy_tasks`` (None: kmirror run's default)."""

    @property
    def records(self) -> int:
        return sum(self.end_offsets)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "ModeRun":
        data = json.loads(text)
        return cls(**{**data, "end_offsets": tuple(data["end_offsets"])})
