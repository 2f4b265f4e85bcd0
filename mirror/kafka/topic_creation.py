"""CreateTopics for any number of topics: in requests the controller accepts, every refusal
named, and done only once metadata shows a leader for every partition.

A KRaft controller refuses a whole request past its caps (:mod:`mirror.protocol.controller_limits`):
10,000 partitions, or 10,000 metadata records. MirrorMaker 2 sends one request for every topic
it lacks and, refused, copies nothing (``PolicyViolationException: Excessively large number
of partitions per request``); Kafka's own ``Admin`` does not split either. Here the topics go
in requests cut to both caps, and a request still refused as too large (a broker whose caps are
lower) is cut in two again, down to one topic.

A topic the controller refuses (a create-topic policy, a quota, no authorization, a bad
config) does not stop the others: every refusal is collected and raised once, as
:class:`TopicCreationError`, which names each topic and why (the job fails naming them, not
with the first one only, and never carries on without them).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

import kafka.errors as kerr
from kafka.protocol.admin import CreateTopicsRequest

from kcodecs import KMirrorError

from ..listing import some_of
from ..protocol.controller_limits import (MAX_PARTITIONS_PER_REQUEST, MAX_RECORDS_PER_REQUEST, creation_records,
                                          is_too_large)
from .errors import BrokerApiError
from .types import NewTopic

if TYPE_CHECKING:
    from .client import KafkaClient

__all__ = ["create_topics", "creation_requests", "TopicCreationError", "LEADER_WAIT_S", "LOG_OPEN_S", "leader_wait_s"]

log = logging.getLogger(__name__)

LEADER_WAIT_S = 60.0
"""How long metadata may show no more of the new topics' leaders before the wait gives up:
Kafka's ``default.api.timeout.ms``. A broker busy opening thousands of partitions just made
publishes the next topic's leader late, but it publishes."""

LOG_OPEN_S = 0.03
"""What the wait allows on top for each partition just made. A KRaft broker publishes a metadata
delta's leaders, then opens the delta's logs before it publishes the next delta: the topics of a
second request show no leader until the first request's logs are all open. CI (2026-12-03, a
loaded 2-core machine, Kafka 4.4): 909 topics of 10 partitions in one request, and the next
request's 92 topics showed none for over 60 s, so the job failed them."""


def leader_wait_s(partitions: int, request_timeout_s: float) -> float:
    """How long metadata may show no more leaders of ``partitions`` new partitions before the
    wait names the topics still without: the broker may be opening all of them first."""
    return max(LEADER_WAIT_S, request_timeout_s) + LOG_OPEN_S * partitions


class TopicCreationError(KMirrorError):
    """Topics that could not be made: ``refused`` maps each to the controller's answer (or, for
    a topic created whose leaders metadata never showed, to None)."""

    def __init__(self, refused: dict[str, BrokerApiError | None], *, waited_s: float = 0.0):
        self.refused = dict(sorted(refused.items()))
        reasons: dict[str, list[str]] = {}
        for topic, error in self.refused.items():
            why = (f"{error.error_name}" + (f": {error.detail}" if error.detail else "") if error is not None
                   else f"created, but metadata showed no leader for all its partitions in {waited_s:.0f} s")
            reasons.setdefault(why, []).append(topic)
        parts = [f"{some_of(topics)} ({why})" for why, topics in reasons.items()]
        super().__init__(f"could not create {len(self.refused)} topic{'s' if len(self.refused) > 1 else ''}: "
                         + "; ".join(parts))


@dataclass
class _Outcome:
    existed: set[str] = field(default_factory=set)
    refused: dict[str, BrokerApiError | None] = field(default_factory=dict)


def creation_requests(topics: Sequence[NewTopic]) -> list[list[NewTopic]]:
    """``topics`` in order, cut into requests within both of the controller's caps. A topic
    that alone passes one goes in a request of its own (the controller then names it)."""
    requests: list[list[NewTopic]] = []
    partitions = records = 0
    for topic in topics:
        cost = creation_records(topic.partitions, len(topic.configs))
        if requests and requests[-1] and (partitions + topic.partitions > MAX_PARTITIONS_PER_REQUEST
                                          or records + cost > MAX_RECORDS_PER_REQUEST):
            requests.append([])
            partitions = records = 0
        if not requests:
            requests.append([])
        requests[-1].append(topic)
        partitions += topic.partitions
        records += cost
    return requests


def create_topics(client: "KafkaClient", topics: Sequence[NewTopic]) -> set[str]:
    """Create ``topics`` (an existing one is fine) and wait until metadata shows every
    partition's leader. Returns the names the controller answered TOPIC_ALREADY_EXISTS for:
    made by someone else, perhaps between the caller's look at the metadata and this request
    (or, when an answer was lost and the request retried, by this one: the caller must then
    take the topic for one it did not make, the safe side). Raises :class:`TopicCreationError`
    naming every topic that could not be made."""
    outcome = _Outcome()
    for request in creation_requests(list({t.name: t for t in topics}.values())):
        _create(client, request, outcome)
    if outcome.refused:
        raise TopicCreationError(outcome.refused)
    made = {t.name: t for t in topics}
    _await_leaders(client, list(made), leader_wait_s(sum(t.partitions for t in made.values()), client.request_timeout_s))
    return outcome.existed


def _create(client: "KafkaClient", topics: list[NewTopic], outcome: _Outcome) -> None:
    """One request's topics, retried while the controller answers a retriable error; cut in
    two where it says the request is too large."""
    pending = {topic.name: topic for topic in topics}

    def attempt() -> bool:
        response = client.call(_request(pending.values(), int(client.request_timeout_s * 1000)))
        retry: list[BrokerApiError] = []
        too_large = False
        for result in response.topics:
            code, message = result.error_code, result.error_message
            if result.name not in pending:
                continue
            if code in (0, kerr.TopicAlreadyExistsError.errno):
                del pending[result.name]
                if code:
                    outcome.existed.add(result.name)
            elif code == kerr.PolicyViolationError.errno and is_too_large(message):
                too_large = True
            else:
                error = BrokerApiError.from_code("CreateTopics", code, topic=result.name, detail=message)
                if error.retriable:
                    retry.append(error)
                else:
                    outcome.refused[result.name] = error
                    del pending[result.name]
        if too_large:
            return True
        if retry:
            raise retry[0]
        return False

    try:
        too_large = client.retrying("create topics", attempt)
    except BrokerApiError as exc:  # a retriable answer that outlasted the retries
        outcome.refused.update({name: exc for name in pending})
        return
    if not too_large or not pending:
        return
    left = list(pending.values())
    if len(left) == 1:
        outcome.refused[left[0].name] = BrokerApiError.from_code(
            "CreateTopics", kerr.PolicyViolationError.errno, topic=left[0].name,
            detail=f"{left[0].partitions} partitions in one topic: more than the controller takes in one request")
        return
    log.info("the controller refused %d topics in one request as too large; sending them in two", len(left))
    _create(client, left[:len(left) // 2], outcome)
    _create(client, left[len(left) // 2:], outcome)


def _await_leaders(client: "KafkaClient", names: list[str], patience_s: float) -> None:
    """Until metadata shows a leader for every partition of ``names``. A broker opening
    thousands of partitions takes a while, so the wait ends only once nothing more appeared
    for ``patience_s`` (:func:`leader_wait_s`); then the topics still without leaders are
    named."""
    missing = set(names)
    progress = time.monotonic()
    pause = 0.05
    while missing:
        shown = client.retrying("wait for created topics", lambda: client.led_topics(sorted(missing)))
        if shown & missing:
            missing -= shown
            progress = time.monotonic()
            pause = 0.05
            continue
        waited = time.monotonic() - progress
        if waited > patience_s:
            raise TopicCreationError(dict.fromkeys(missing), waited_s=waited)
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


def _request(topics: Iterable[NewTopic], timeout_ms: int) -> CreateTopicsRequest:
    creatable = CreateTopicsRequest.CreatableTopic
    return CreateTopicsRequest(timeout_ms=timeout_ms, validate_only=False, topics=[
        creatable(name=topic.name, num_partitions=topic.partitions, replication_factor=topic.replication_factor,
                  assignments=[], configs=[creatable.CreatableTopicConfig(name=k, value=v) for k, v in topic.configs.items()])
        for topic in topics])
