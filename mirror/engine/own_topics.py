"""kmirror's own topics at a destination, named by the modules that own them: a job mirroring
that cluster onward (or back, active-active) never copies another job's bookkeeping; and a job
creates all of them, in one request, before anything needs them (:func:`create_own_topics`)."""

from __future__ import annotations

from ..config import MirrorConfig
from ..kafka import KafkaClient, NewTopic
from .flow import FLOW_TOPIC_PREFIX, flow_topic_spec
from .offset_syncs import OFFSET_SYNCS_TOPIC_PREFIX, offset_syncs_topic_spec
from .offsets_topic import OFFSETS_TOPIC_PREFIX, offsets_topic_spec
from .provenance import PROVENANCE_TOPIC, provenance_topic_spec

__all__ = ["is_own_topic", "mirrored", "own_topic_specs", "create_own_topics"]


def is_own_topic(topic: str) -> bool:
    """A job's offsets, offset syncs or flow state, or a cluster's provenance."""
    return topic.startswith((OFFSETS_TOPIC_PREFIX, OFFSET_SYNCS_TOPIC_PREFIX, FLOW_TOPIC_PREFIX)) or \
        topic == PROVENANCE_TOPIC


def mirrored(config: MirrorConfig, topic: str) -> bool:
    """Whether ``config``'s job mirrors a source topic, by its name: the configuration selects it
    (:meth:`MirrorConfig.selects`) and it is not kmirror's own."""
    return config.clusters.selects(topic) and not is_own_topic(topic)


def own_topic_specs(config: MirrorConfig) -> list[NewTopic]:
    """The topics ``config``'s job writes at its destination: the cluster's provenance, the
    job's offset syncs (where copied records landed, for group offset translation), its flow
    state (:mod:`.flow`: its presence, and which cluster is primary) and, under exactly-once,
    its offsets."""
    specs = [provenance_topic_spec(), offset_syncs_topic_spec(config.job_name), flow_topic_spec(config.job_name)]
    if config.delivery.mode == "exactly-once":
        specs.append(offsets_topic_spec(config.job_name))
    return specs


def create_own_topics(config: MirrorConfig, destination: KafkaClient) -> None:
    """Make the job's own topics before the first destination topic or copy needs them, in one
    request, and wait for their leaders: a destination busy with thousands of partitions
    (a whole cluster mirrored, or made just before) answers their metadata late, and a copy
    that met them missing would fail."""
    destination.create_topics(own_topic_specs(config))
