"""A destination topic deleted under the job: what was copied into it is gone, and it is no outage.

A job's offsets say how far each source partition was copied; once the destination topic is
deleted they describe records nobody holds any more. Copying on from them into a topic made
again under the name would leave a hole of everything copied before, and waiting for the
deleted topic to come back, as for a broker that does not answer, waits for ever (issue 70).

The destination's provenance (:mod:`.provenance`) records each destination topic's id once the
job has seen it (KIP-516). A selected topic whose provenance has an id, and that the
destination does not list, was lost (:func:`lost_destinations`). What follows depends on who
made it:

- **kmirror created it**: by default (``--on-destination-lost recreate``) it is made again as
  kmirror makes it, and its source is copied again from its log start, with one WARN line
  (:meth:`DestinationLoss.line`); ``--on-destination-lost fail`` stops the job with that line
  (:class:`DestinationLostError`, exit 1).
- **the user made it** (provenance ``created`` false): kmirror never makes it again. That topic
  fails, with one ERROR line, and the job's other topics go on; a ``--once`` run then fails
  naming it (:class:`LostTopicsError`).

A destination that lists no topic ids (before Kafka 2.8) keeps no id in provenance: a deleted
topic there is made again and copied on from the job's offsets, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping

from kcodecs import KMirrorError

from ..kafka.types import TopicListing
from .provenance import Provenance

__all__ = ["DestinationLoss", "DestinationLostError", "LostTopicsError", "lost_destinations", "recreated_or_fail"]


@dataclass(frozen=True)
class DestinationLoss:
    """Destination topic ``topic`` (of id ``lost_id``), the copy of ``source_topic``, is gone."""

    source_topic: str
    topic: str
    lost_id: str
    created: bool
    """kmirror created it (provenance ``created``)."""
    made_again: bool = False
    """The destination lists a topic of the name under another id (made again, by kmirror in a
    run that ended before it copied, or by someone else)."""

    @property
    def copied_again(self) -> bool:
        """Its source is copied again from its log start: kmirror made the topic, or someone made
        it again; only a deleted topic of the user's stays deleted, and is not copied."""
        return self.created or self.made_again

    def line(self) -> str:
        what = f"destination topic {self.topic} (topic id {self.lost_id}) was deleted"
        if self.made_again:
            what += " and made again"
        if self.copied_again:
            return f"{what}: what the job had copied of {self.source_topic} into it is gone"
        return (f"{what}, and kmirror did not create it, so it does not make it again: {self.source_topic} is not "
                f"copied any more (make {self.topic} again and restart the job to copy it from its log start)")


class DestinationLostError(KMirrorError):
    """A destination topic kmirror created was deleted and ``--on-destination-lost fail`` asks to stop."""

    def __init__(self, loss: DestinationLoss):
        super().__init__(f"{loss.line()}; --on-destination-lost fail stopped the job rather than make it again "
                         f"(docs/operations.md, 'A topic deleted or made again')")
        self.loss = loss


class LostTopicsError(KMirrorError):
    """A run that was asked to copy to its end could not, for destination topics of the user's
    that were deleted under it."""

    def __init__(self, losses: list[DestinationLoss]):
        names = ", ".join(sorted(f"{loss.source_topic} -> {loss.topic}" for loss in losses))
        super().__init__(f"{len(losses)} topic{'s' if len(losses) > 1 else ''} not copied: destination topic"
                         f"{'s' if len(losses) > 1 else ''} kmirror did not create deleted under the job: {names}")
        self.losses = losses


def lost_destinations(named: Mapping[str, str], listed: Mapping[str, TopicListing],
                      records: Mapping[str, Provenance]) -> list[DestinationLoss]:
    """The losses among the pairs ``named`` (source topic -> destination topic): a destination
    topic the job has a provenance id for that the destination does not list, or lists under
    another id, and a topic of the user's (it was there once) that it does not list. Topics
    without provenance are new, and created as new."""
    losses = []
    for source_topic, topic in sorted(named.items()):
        record = records.get(topic)
        if record is None:
            continue
        listing = listed.get(topic)
        if listing is None:
            if record.topic_id is not None or not record.created:
                losses.append(DestinationLoss(source_topic, topic, record.topic_id or "unknown", record.created))
        elif record.topic_id is not None and listing.topic_id is not None and listing.id_text != record.topic_id:
            losses.append(DestinationLoss(source_topic, topic, record.topic_id, record.created, made_again=True))
    return losses


def recreated_or_fail(losses: list[DestinationLoss], policy: Literal["recreate", "fail"]) -> list[DestinationLoss]:
    """The losses whose source is copied again from its log start
    (:attr:`DestinationLoss.copied_again`), unless ``policy`` is ``fail``: then the first of
    those kmirror created raises :class:`DestinationLostError` (the policy is about kmirror's
    topics: one of the user's, made again by the user, is copied into whatever it says)."""
    again = [loss for loss in losses if loss.copied_again]
    ours = [loss for loss in again if loss.created]
    if ours and policy == "fail":
        raise DestinationLostError(ours[0])
    return again
