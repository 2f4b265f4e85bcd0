"""Exit codes of kmirror's commands, the same for every command, and which error ends with which."""

from __future__ import annotations

import logging

from kcodecs import KMirrorError

__all__ = ["EXIT_FAILED", "EXIT_UNUSABLE", "exit_code"]

log = logging.getLogger("kmirror")

EXIT_FAILED = 1
"""The work failed (a corrupt source batch, data loss, a broker that refused a write)."""
EXIT_UNUSABLE = 2
"""Bad configuration, refused credentials or an unreachable cluster: nothing was attempted."""


def exit_code(exc: KMirrorError, unusable: tuple[type[KMirrorError], ...], failed: str) -> int:
    """Log why a command ends on ``exc`` and return its exit code: :data:`EXIT_UNUSABLE` for the
    ``unusable`` kinds of error, said as they are; :data:`EXIT_FAILED` for the rest, after
    ``failed``. An error a Spark task reported by name (its ``kind``) counts by that name."""
    kind = getattr(exc, "kind", None)
    if isinstance(exc, unusable) or kind in {error.__name__ for error in unusable}:
        log.error("%s", exc)
        return EXIT_UNUSABLE
    log.error("%s: %s", failed, exc)
    return EXIT_FAILED
