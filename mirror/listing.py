"""Many names in one line of a log or an error: the first few, then how many more.

A whole cluster mirrored is thousands of topics; a line that lists each one is unreadable,
and one that lists none cannot be acted on.
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["some_of"]

SHOWN = 8


def some_of(items: Iterable[object], shown: int = SHOWN) -> str:
    """``a, b, c and 997 more``: the first ``shown`` items, in the order given."""
    items = [str(item) for item in items]
    named = ", ".join(items[:shown])
    return named + (f" and {len(items) - shown} more" if len(items) > shown else "")
