"""The garbage collector kept off what was alive before a copy."""

from __future__ import annotations

import contextlib
import gc

__all__ = ["collecting_new_objects_only"]


@contextlib.contextmanager
def collecting_new_objects_only():
    """Keep the garbage collector off the objects that were alive before the copy.

    A worker holds tens of thousands of objects from its imports and clients, and the
    batches a copy keeps in flight, surviving into the oldest generation, soon trigger a full
    collection that walks all of them, a sizeable share of a copy's CPU (figures:
    docs/performance.md, "Reading ahead, the garbage collector, and the source's producer
    state"). Frozen for the copy (``gc.freeze``), those objects are left out of its
    collections; the copy's own garbage is still collected, and everything is collected as
    usual once the copy ends. A copy that starts while a freeze is held (by its caller, or by
    a copy in another thread) leaves that freeze to its holder."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
