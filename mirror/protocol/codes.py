"""Kafka's small enums as they travel: a code a newer peer added reads as ``UNKNOWN``.

Kafka's own enums (``ResourceType.fromCode``, ``ConfigSource``...) map a code they do not know
to UNKNOWN rather than failing, so that an older client can still read a newer broker's
answer. Every enum here with an ``UNKNOWN`` member (code 0) does the same through
:meth:`KafkaCode.of`.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["KafkaCode"]


class KafkaCode(IntEnum):
    """An enum of Kafka wire codes whose member 0 is ``UNKNOWN``."""

    @classmethod
    def of(cls, code: int):
        """The member for ``code``; ``UNKNOWN`` for a code this version does not know."""
        try:
            return cls(code)
        except ValueError:  # a value a newer peer added
            return cls(0)
