"""Source topics copied again from their log start, because the destination topic the job had
copied them into was lost (:mod:`mirror.engine.destination_loss`).

The driver finds the loss (between micro-batches, or when a copy meets the topic missing); the
plan is the planner's, in a process of its own. So the driver writes each loss to a file in the
checkpoint directory, ``{source topic: id of the lost destination topic}``, before it makes the
topic again, and the planner reads it at every trigger (one ``stat`` while it is unchanged).
A loss the checkpoint's offsets do not name yet under :data:`~.offsets.REWOUND` is planned
once: the topic's offsets leave the plan, and its partitions start again at their earliest
offsets, as a new topic's do, with nothing to copy in that micro-batch; the offsets then name
the loss, so a restart does not copy the topic a third time. The lost topic's id is the key
because a run that ends between the loss and the copy finds the same loss again
(:func:`~mirror.engine.destination_loss.lost_destinations`) and writes the same entry.

Until the planner has planned a loss, the topic's ranges planned before it are of the lost
topic, and are not copied (:func:`unrewound`): into the new topic they would leave out
everything before them.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Mapping

from ..config import MirrorConfig
from ..engine.destination_loss import DestinationLoss, recreated_or_fail
from ..metrics import MirrorMetrics

__all__ = ["REWINDS_FILE_OPTION", "rewinds_file", "read_rewinds", "unrewound", "DestinationLosses"]

log = logging.getLogger(__name__)

REWINDS_FILE_OPTION = "rewindsFile"
_NAME = "kmirror-rewinds.json"


def rewinds_file(config: MirrorConfig) -> Path:
    """The job's file of losses, beside Spark's own state in the checkpoint directory."""
    return Path(config.streaming.checkpoint) / _NAME


def read_rewinds(path: Path) -> dict[str, str]:
    """``{source topic: lost destination topic id}``; empty while no loss was written."""
    try:
        return dict(json.loads(path.read_text()))
    except FileNotFoundError:
        return {}


def unrewound(rewinds: Mapping[str, str], rewound: Mapping[str, str]) -> set[str]:
    """The topics whose loss the plan has not planned yet (see the module's doc)."""
    return {topic for topic, lost in rewinds.items() if rewound.get(topic) != lost}


class DestinationLosses:
    """The driver's side: the ``on_lost`` of
    :func:`~mirror.engine.topics.sync_destination_topics`. Applies ``--on-destination-lost``,
    writes the topics copied again (before they are made again), says each loss in one line,
    and keeps the topics of the user's that are not copied any more (:attr:`failed`)."""

    def __init__(self, config: MirrorConfig, metrics: MirrorMetrics | None = None):
        self.path = rewinds_file(config)
        self.metrics = metrics
        """Counts each loss (``kmirror_destination_topics_lost_total``), where the job serves metrics."""
        self.policy = config.delivery.on_destination_lost
        self.failed: dict[str, DestinationLoss] = {}
        """Source topic -> the loss of its destination topic of the user's: not copied by this run."""
        self.pending: set[str] = set()
        """Source topics whose ranges already planned are the lost topic's: not copied."""

    def __call__(self, losses: list[DestinationLoss]) -> list[DestinationLoss]:
        """Handle ``losses``; returns those whose source is copied again."""
        again = recreated_or_fail(losses, self.policy)
        if again:
            self._write({loss.source_topic: loss.lost_id for loss in again})
        for loss in again:
            self.failed.pop(loss.source_topic, None)  # the user's, made again by the user: copied again
            log.warning("%s; %s", loss.line(),
                        f"{loss.source_topic} is copied again from its log start into the new topic" if loss.made_again
                        else f"kmirror makes it again as it made it, and copies {loss.source_topic} again from its "
                             f"log start")
            self.pending.add(loss.source_topic)
            if self.metrics is not None:
                self.metrics.destination_lost(loss.topic, True)
        for loss in losses:
            if not loss.copied_again and loss.source_topic not in self.failed:
                log.error("%s", loss.line())
                self.failed[loss.source_topic] = loss
                if self.metrics is not None:
                    self.metrics.destination_lost(loss.topic, False)
        return again

    def _write(self, entries: Mapping[str, str]) -> None:
        """Merge ``entries`` into the file, replaced whole (a reader sees the old or the new)."""
        merged = read_rewinds(self.path) | dict(entries)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".partial")
        with open(partial, "w") as file:
            json.dump(merged, file, sort_keys=True)
            file.flush()
            os.fsync(file.fileno())
        partial.replace(self.path)
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename too, before the topic is made again
        finally:
            os.close(directory)
