"""kmirror's own topics at a destination, named by the modules that own them: a job mirroring
that cluster onward (or back, active-active) never copies another job's bookkeeping."""

from __future__ import annotations

from ..config import MirrorConfig
from .offset_syncs import OFFSET_SYNCS_TOPIC_PREFIX
from .offsets_topic import OFFSETS_TOPIC_PREFIX
from .provenance import PROVENANCE_TOPIC

__all__ = ["is_own_topic", "mirrored"]


def is_own_topic(topic: str) -> bool:
    """A job's offsets or offset syncs, or a cluster's provenance."""
    return topic.startswith((OFFSETS_TOPIC_PREFIX, OFFSET_SYNCS_TOPIC_PREFIX)) or topic == PROVENANCE_TOPIC


def mirrored(config: MirrorConfig, topic: str) -> bool:
    """Whether ``config``'s job mirrors a source topic, by its name: the configuration selects it
    (:meth:`MirrorConfig.selects`) and it is not kmirror's own."""
    return config.clusters.selects(topic) and not is_own_topic(topic)
