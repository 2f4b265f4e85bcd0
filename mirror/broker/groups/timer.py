"""A keyed timer on the broker's Clock (Kafka's coordinator ``CoordinatorTimer``).

Scheduling a key replaces its previous deadline, so "reschedule the member's heartbeat
expiry" is one call, as in Kafka. Deadlines are Clock milliseconds, not the event loop's
monotonic time: the broker runs :meth:`run_expired` every ``GroupConfig.tick_interval_ms``,
and tests move the Clock and run it themselves instead of waiting.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Callable, Hashable

__all__ = ["Timer"]


class Timer:
    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[int, int, Callable[[], None]]] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._sequence = itertools.count()

    def schedule(self, key: Hashable, deadline_ms: int, action: Callable[[], None]) -> None:
        """Run ``action`` once the Clock reaches ``deadline_ms``, unless rescheduled or cancelled first."""
        sequence = next(self._sequence)
        self._entries[key] = (deadline_ms, sequence, action)
        heapq.heappush(self._heap, (deadline_ms, sequence, key))

    def cancel(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def run_expired(self, now_ms: int) -> None:
        """Run every action due by ``now_ms``, earliest first; actions may schedule more."""
        while self._heap and self._heap[0][0] <= now_ms:
            _, sequence, key = heapq.heappop(self._heap)
            entry = self._entries.get(key)
            if entry is None or entry[1] != sequence:
                continue  # cancelled or rescheduled: a stale heap entry
            del self._entries[key]
            entry[2]()
