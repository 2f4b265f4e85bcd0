"""One mirror job's configuration: its sections, and what only the whole can say (the job's
name and how long it waits out an outage, which depend on two sections each)."""

from __future__ import annotations

import hashlib
import math

from pydantic import Field

from .base import Strict
from .clusters import Clusters
from .sections import ONCE_MAX_OUTAGE_S, Delivery, Limits, Routing, Streaming, Sync, Takeover

__all__ = ["MirrorConfig", "SECTIONS"]


class MirrorConfig(Strict):
    """One mirror job: which topics go where, how they are partitioned, and how Spark drives it.

    Each field is a section, a TOML table of its own (docs/configuration.md); keys from before
    the sections are still read (:mod:`.loading`)."""

    clusters: Clusters
    sync: Sync = Field(default_factory=Sync)
    routing: Routing = Field(default_factory=Routing)
    streaming: Streaming = Field(default_factory=Streaming)
    delivery: Delivery = Field(default_factory=Delivery)
    limits: Limits = Field(default_factory=Limits)
    takeover: Takeover = Field(default_factory=Takeover)

    @property
    def job_name(self) -> str:
        """``delivery.name``, or one derived from the checkpoint: the checkpoint is what identifies a
        streaming query, so the same checkpoint keeps the same offsets topic and transactional ids."""
        if self.delivery.name is not None:
            return self.delivery.name
        return "kmirror-" + hashlib.sha1(str(self.streaming.checkpoint.absolute()).encode()).hexdigest()[:10]

    @property
    def outage_limit_s(self) -> float:
        """``limits.max_outage_s``, or its default for the run mode: a long-running mirror waits as
        long as an outage lasts (as MirrorMaker 2's tasks do), a ``once`` run gives up."""
        if self.limits.max_outage_s is not None:
            return self.limits.max_outage_s
        return ONCE_MAX_OUTAGE_S if self.streaming.once else math.inf

    @property
    def mm2_offsets_topic(self) -> str:
        return self.takeover.offsets_topic or f"mm2-offsets.{self.clusters.source_cluster_alias}.internal"

    @property
    def mm2_connect_group(self) -> str:
        return self.takeover.connect_group or f"{self.clusters.source_cluster_alias}-mm2"

    @property
    def mm2_offset_syncs_topic(self) -> str:
        return self.takeover.offset_syncs_topic or f"mm2-offset-syncs.{self.clusters.destination_cluster_alias}.internal"

    def replaced(self, section: str, **values) -> "MirrorConfig":
        """A copy with ``values`` set in ``section`` (``replaced("streaming", copy_tasks=4)``)."""
        return self.model_copy(update={section: getattr(self, section).model_copy(update=values)})


SECTIONS = tuple(MirrorConfig.model_fields)
"""The sections' names, in order: each a table of ``--config``."""
