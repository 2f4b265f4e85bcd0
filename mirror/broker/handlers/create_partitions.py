"""CreatePartitions (key 37), v0-3 (KIP-195): more partitions for existing topics, never fewer.

Per topic, as Kafka's controller answers (``ControllerApis.createPartitions`` and
``ReplicationControlManager.createPartitions``): UNKNOWN_TOPIC_OR_PARTITION; INVALID_PARTITIONS
for the same count ("Topic already has N partition(s).") or a lower one; INVALID_REQUEST for a
topic named twice; INVALID_REPLICA_ASSIGNMENT unless manual assignments number the new
partitions and each is this broker alone (replication factor 1). ``validate_only`` checks
without adding. The new partitions are persisted and in Metadata before the answer; the
request's timeout is not needed, nothing waits for replicas.
"""

from __future__ import annotations

from collections import Counter

from kafka.protocol.admin import CreatePartitionsRequest, CreatePartitionsResponse

from ..errors import ApiError, kerr
from ._api import Api

API = Api(key=37, min_version=0, max_version=3, request=CreatePartitionsRequest)

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def handle(request, version: int, state) -> CreatePartitionsResponse:
    named = Counter(wanted.name for wanted in request.topics)
    results = [Result(name=name, error_code=kerr.InvalidRequestError.errno, error_message="Duplicate topic name.")
               for name, times in named.items() if times > 1]
    for wanted in request.topics:
        if named[wanted.name] > 1:
            continue
        error, message = 0, None
        try:
            for assignment in wanted.assignments or ():
                _check_assignment(assignment.broker_ids, state.config.node_id)
            state.topics.add_partitions(
                wanted.name, wanted.count, validate_only=request.validate_only,
                assignments=None if wanted.assignments is None else len(wanted.assignments))
        except ApiError as exc:
            error, message = exc.code, exc.message
        results.append(Result(name=wanted.name, error_code=error, error_message=message))
    return CreatePartitionsResponse(version=version, throttle_time_ms=0, results=results)


def _check_assignment(broker_ids: list[int], node_id: int) -> None:
    """Kafka's ``validateManualPartitionAssignment`` on a one-broker cluster: the replicas of a
    new partition are exactly this broker, as for the topic's existing partitions."""
    if not broker_ids:
        raise ApiError(kerr.InvalidReplicationAssignmentError,
                       "The manual partition assignment includes an empty replica list.")
    for broker_id in broker_ids:
        if broker_id != node_id:
            raise ApiError(kerr.InvalidReplicationAssignmentError, f"The manual partition assignment includes broker"
                                                                   f" {broker_id}, but no such broker is registered.")
    if len(broker_ids) > 1:
        raise ApiError(kerr.InvalidReplicationAssignmentError,
                       f"The manual partition assignment includes the broker {node_id} more than once.")
