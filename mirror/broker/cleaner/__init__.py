"""The embedded broker's log cleaner: compaction of ``cleanup.policy=compact`` topics (seeds
003 and 004, Kafka's ``LogCleaner``).

- :mod:`.manager` picks the dirtiest partition and runs the cleaner thread;
- :mod:`.clean` cleans one partition: offset map, filtered segments, crash-safe swap;
- :mod:`.offset_map` is the fixed-memory key -> latest offset map;
- :mod:`.transactions` decides aborted batches and spent markers;
- :mod:`.checkpoint` keeps ``cleaner-offset-checkpoint``.

docs/broker.md ("Log compaction") explains the rules for users.
"""

from .clean import CleanStats, CleanTarget, CleanerStopped, CorruptLogError, clean_partition
from .manager import CleanerConfig, LogCleaner
from .offset_map import OffsetMap

__all__ = ["LogCleaner", "CleanerConfig", "CleanStats", "CleanTarget", "clean_partition", "CleanerStopped",
           "CorruptLogError", "OffsetMap"]
