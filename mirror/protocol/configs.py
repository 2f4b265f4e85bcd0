"""IncrementalAlterConfigs (KIP-339) as both sides speak it: one operation on one config.

The client (``mirror.kafka.admin``, for the topic config sync) sends these, and the embedded
broker (``mirror.broker.topic_config``) applies them, so the operation codes are defined once.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = ["ConfigOp", "ConfigChange"]


class ConfigOp(IntEnum):
    """An IncrementalAlterConfigs operation (Kafka's ``AlterConfigOp.OpType``, KIP-339)."""

    SET = 0
    DELETE = 1
    """Back to the default."""
    APPEND = 2
    """Add items to a list config, those not in it yet."""
    SUBTRACT = 3
    """Remove items from a list config."""


@dataclass(frozen=True)
class ConfigChange:
    """One config of an IncrementalAlterConfigs resource: its name, the operation and the value
    (None for DELETE). ``op`` is a :class:`ConfigOp`, or, as the broker receives it, any code a
    client sent: the broker refuses one it does not know (INVALID_REQUEST)."""

    name: str
    op: int
    value: str | None = None
