"""Which topic a name stands for: its id (KIP-516), kept with the job's plan, so that a source
topic deleted and made again under its name is not taken for the one the job was copying.

A job's offsets say how far it copied each source partition; they mean nothing in a topic of
the same name made since, whose offsets start again at its log start. MirrorMaker 2 goes on
from the old offset there and silently skips the new topic's first records (apache/kafka
#20513 and the PRs after it). kmirror records each source topic's id beside the offsets it
plans (:mod:`mirror.spark.offsets`) and compares it with the id Metadata lists at every
trigger (:func:`check_identities`): another id is another topic. What the job does then is
``--on-topic-recreated`` (:func:`follow_or_fail`): by default it follows the new topic from its
log start; ``fail`` stops it with :class:`TopicRecreatedError` naming the topic and both ids.

A cluster that lists no ids (Kafka before 2.8) cannot be told apart this way: there, a topic
made again is the same topic, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping

from kcodecs import KMirrorError

from ..kafka.types import TopicListing

__all__ = ["TopicRecreatedError", "Recreated", "Identities", "check_identities", "follow_or_fail"]


@dataclass(frozen=True)
class Recreated:
    """Source topic ``topic`` is not the one the job planned: ``old_id`` is the topic the job
    copied, ``new_id`` the one the name stands for now."""

    topic: str
    old_id: str
    new_id: str

    def line(self) -> str:
        return f"source topic {self.topic} was deleted and made again (topic id {self.old_id} is now {self.new_id})"


class TopicRecreatedError(KMirrorError):
    """A source topic was made again and ``--on-topic-recreated fail`` asks to stop."""

    def __init__(self, recreated: Recreated):
        super().__init__(f"{recreated.line()}: the job's offsets are the old topic's, and --on-topic-recreated "
                         f"fail stopped the job rather than follow the new one (docs/operations.md, 'A topic "
                         f"deleted or made again')")
        self.topic, self.old_id, self.new_id = recreated.topic, recreated.old_id, recreated.new_id


@dataclass(frozen=True)
class Identities:
    """The ids to plan with from now on, and the planned topics whose name another has now."""

    ids: dict[str, str]
    recreated: tuple[Recreated, ...] = ()


def check_identities(known: Mapping[str, str], listed: Mapping[str, TopicListing]) -> Identities:
    """``known`` (topic -> id, as planned so far) with the ids of the topics ``listed`` now: a
    listed topic whose id is not the one known is among the ``recreated``, and planned with
    its new id. A known topic not listed (deleted, or not selected any more) keeps its id, so
    that a topic made again under its name later is still told apart."""
    ids = dict(known)
    recreated = []
    for topic in sorted(listed):
        now = listed[topic].topic_id
        if now is None:
            continue
        before = known.get(topic)
        if before is not None and before != str(now):
            recreated.append(Recreated(topic, before, str(now)))
        ids[topic] = str(now)
    return Identities(ids, tuple(recreated))


def follow_or_fail(identities: Identities, policy: Literal["follow", "fail"]) -> frozenset[str]:
    """The topics to follow from their log start (``follow``); under ``fail``, a topic made
    again raises :class:`TopicRecreatedError`."""
    if identities.recreated and policy == "fail":
        raise TopicRecreatedError(identities.recreated[0])
    return frozenset(r.topic for r in identities.recreated)
