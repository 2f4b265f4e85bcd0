"""Metadata (key 3), v0-12: one broker, leader of every partition, topics by name or (v10+) id.

v0 asks for all topics with an empty list, v1+ with null. Unknown topics get
UNKNOWN_TOPIC_OR_PARTITION unless auto-creation is on (broker flag, and the client's
``allow_auto_topic_creation`` from v4). From v10 every topic carries its id (KIP-516), by
which a client tells a topic made again under the same name from the one it knew; a request
topic named by id only (v12: a null name) that no topic has is UNKNOWN_TOPIC_ID, as in Kafka.
"""

from __future__ import annotations

import uuid

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from ..errors import ApiError, kerr
from ._api import Api

API = Api(key=3, min_version=0, max_version=12, request=MetadataRequest)

_NO_ID = uuid.UUID(int=0)


async def handle(request, version: int, state) -> MetadataResponse:
    node = state.config.node_id
    host, port = state.advertised
    store = state.topics
    if request.topics is None or (version == 0 and not request.topics):
        wanted = [(name, None) for name in sorted(store.topics)]
    else:
        wanted = [(t.name, getattr(t, "topic_id", None)) for t in request.topics]
    allow_auto = state.config.auto_create_topics and (version < 4 or request.allow_auto_topic_creation)
    topics = []
    for name, topic_id in wanted:
        if name is None:  # by id only
            found = store.by_id(topic_id) if topic_id not in (None, _NO_ID) else None
            if found is None:
                topics.append(_topic(version, None, topic_id or _NO_ID, kerr.UnknownTopicIdError.errno, []))
                continue
            name = found.name
        error = 0
        if name not in store.topics and allow_auto:
            try:
                store.create(name, state.config.default_partitions, {})
            except ApiError as exc:
                error = exc.code
        topic = store.topics.get(name)
        if topic is None:
            topics.append(_topic(version, name, _NO_ID, error or kerr.UnknownTopicOrPartitionError.errno, []))
            continue
        partitions = [
            MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
                error_code=0, partition_index=p.index, leader_id=node, leader_epoch=0,
                replica_nodes=[node], isr_nodes=[node], offline_replicas=[],
            )
            for p in topic.partitions
        ]
        topics.append(_topic(version, name, topic.topic_id, 0, partitions))
    return MetadataResponse(
        version=version,
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=node, host=host, port=port, rack=None)],
        cluster_id=state.config.cluster_id,
        controller_id=node,
        topics=topics,
    )


def _topic(version: int, name: str | None, topic_id: uuid.UUID, error: int, partitions: list):
    fields = {"error_code": error, "name": name, "is_internal": False, "partitions": partitions}
    if version >= 10:
        fields["topic_id"] = topic_id
    return MetadataResponse.MetadataResponseTopic(**fields)
