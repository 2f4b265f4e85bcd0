"""Metadata (key 3), v0-9: one broker, leader of every partition, topics by name.

v0 asks for all topics with an empty list, v1+ with null. Unknown topics get
UNKNOWN_TOPIC_OR_PARTITION unless auto-creation is on (broker flag, and the client's
``allow_auto_topic_creation`` from v4).
"""

from __future__ import annotations

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from ..errors import ApiError, kerr
from ._api import Api

API = Api(key=3, min_version=0, max_version=9, request=MetadataRequest)


async def handle(request, version: int, state) -> MetadataResponse:
    node = state.config.node_id
    host, port = state.advertised
    store = state.topics
    if request.topics is None or (version == 0 and not request.topics):
        names = sorted(store.topics)
    else:
        names = [t.name for t in request.topics]
    allow_auto = state.config.auto_create_topics and (version < 4 or request.allow_auto_topic_creation)
    topics = []
    for name in names:
        error = 0
        if name not in store.topics and allow_auto:
            try:
                store.create(name, state.config.default_partitions, {})
            except ApiError as exc:
                error = exc.code
        topic = store.topics.get(name)
        if topic is None:
            topics.append(MetadataResponse.MetadataResponseTopic(error_code=error or kerr.UnknownTopicOrPartitionError.errno, name=name, is_internal=False, partitions=[]))
            continue
        partitions = [
            MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
                error_code=0, partition_index=p.index, leader_id=node, leader_epoch=0,
                replica_nodes=[node], isr_nodes=[node], offline_replicas=[],
            )
            for p in topic.partitions
        ]
        topics.append(MetadataResponse.MetadataResponseTopic(error_code=0, name=name, is_internal=False, partitions=partitions))
    return MetadataResponse(
        version=version,
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=node, host=host, port=port, rack=None)],
        cluster_id=state.config.cluster_id,
        controller_id=node,
        topics=topics,
    )
