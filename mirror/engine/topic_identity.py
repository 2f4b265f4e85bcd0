"""Which topic a name stands for: its id (KIP-516), kept with the job's plan, so that a source
topic deleted and made again under its name is not taken for the one the job was copying.

A job's offsets say how far it copied each source partition; they mean nothing in a topic of
the same name made since, whose offsets start again at its log start. MirrorMaker 2 goes on
from the old offset there and silently skips the new topic's first records (apache/kafka
#20513 and the PRs after it). kmirror records each source topic's id beside the offsets it
plans (:mod:`mirror.spark.offsets`) and compares it with the id Metadata lists at every
trigger: another id is another topic, and the job stops with :class:`TopicRecreatedError`
naming it, rather than copy from an offset of the topic that is gone.

A cluster that lists no ids (Kafka before 2.8) cannot be told apart this way: there, a topic
made again is the same topic, as before.
"""

from __future__ import annotations

from typing import Mapping

from kcodecs import KMirrorError

from ..kafka.types import TopicListing

__all__ = ["TopicRecreatedError", "check_identities"]


class TopicRecreatedError(KMirrorError):
    """Source topic ``topic`` was deleted and made again since the job planned it: ``old_id``
    is the topic the job copied, ``new_id`` the one the name stands for now."""

    def __init__(self, topic: str, old_id: str, new_id: str):
        super().__init__(f"source topic {topic} was deleted and made again (topic id {old_id} is now {new_id}): "
                         f"the job's offsets are the old topic's, and copying on from them would skip the new "
                         f"topic's first records; the job stopped instead (docs/operations.md, 'A topic deleted or "
                         f"made again')")
        self.topic, self.old_id, self.new_id = topic, old_id, new_id


def check_identities(known: Mapping[str, str], listed: Mapping[str, TopicListing]) -> dict[str, str]:
    """The ids to plan with from now on: ``known`` (topic -> id, as planned so far) with those
    of the topics ``listed`` now that had none. Raises :class:`TopicRecreatedError` for a
    listed topic whose id is not the one known. A known topic not listed (deleted, or not
    selected any more) keeps its id, so that a topic made again under its name later is still
    told apart."""
    ids = dict(known)
    for topic in sorted(listed):
        now = listed[topic].topic_id
        if now is None:
            continue
        before = known.get(topic)
        if before is not None and before != str(now):
            raise TopicRecreatedError(topic, before, str(now))
        ids[topic] = str(now)
    return ids
