"""What the copy raises on purpose: about the data, each naming the source partition and
offset; about the copy's own parts, naming the part.

::

    KMirrorError                  (kcodecs)
    ├── CorruptSourceError        a source batch failed its checks; nothing after it was copied
    ├── DataLossError             source data was deleted (retention) before it was copied
    ├── SourceTruncatedError      the source log ends before offsets it already reported
    ├── TopicMismatchError        a destination topic cannot take the source's partitions
    └── CopierRefusedError        a resident copier could not read what its task sent
"""

from __future__ import annotations

from kcodecs import KMirrorError

from ..kafka.types import TopicPartition

__all__ = ["CorruptSourceError", "DataLossError", "SourceTruncatedError", "TopicMismatchError", "CopierRefusedError"]


class CorruptSourceError(KMirrorError):
    def __init__(self, tp: TopicPartition, offset: int, reason: str):
        super().__init__(f"corrupt source batch in {tp} at offset {offset}: {reason}; "
                         f"nothing from offset {offset} on was copied")
        self.tp, self.offset, self.reason = tp, offset, reason


class DataLossError(KMirrorError):
    """Offsets ``[offset, earliest)`` of ``tp`` are gone. Raised unless ``on_data_loss`` is ``skip-to-earliest``."""

    def __init__(self, tp: TopicPartition, offset: int, earliest: int):
        super().__init__(f"data loss in {tp}: offsets {offset} to {earliest - 1} were deleted at the source "
                         f"before they were copied (use --on-data-loss skip-to-earliest to go on without them)")
        self.tp, self.offset, self.earliest = tp, offset, earliest


class SourceTruncatedError(KMirrorError):
    def __init__(self, tp: TopicPartition, offset: int, high_watermark: int):
        super().__init__(f"{tp}: the source log ends at {high_watermark}, before offset {offset} it had already "
                         f"reported (truncated or recreated topic)")
        self.tp, self.offset, self.high_watermark = tp, offset, high_watermark


class TopicMismatchError(KMirrorError):
    """For example ``preserve`` partitioning into a destination topic with fewer partitions."""


class CopierRefusedError(KMirrorError):
    """A resident copier (:mod:`.copier`) answered that it could not read its task's message;
    the text says which kind and which fields. A new copier of this same kmirror would refuse
    it again, so the job fails with the reason rather than running the task again."""
