"""DeleteTopics (key 20), v1-6: delete topics by name, with their partition data.

Per topic, as Kafka's controller answers (``ControllerApis.deleteTopics``):
UNKNOWN_TOPIC_OR_PARTITION for a name it does not have, INVALID_REQUEST for a name given
twice. v6 may name a topic by id instead (KIP-516, the id Metadata v10+ lists): an id no topic
has is UNKNOWN_TOPIC_ID; a name and an id together, or neither, are INVALID_REQUEST. The
deletion is done before the answer (Kafka's completes asynchronously); the same name can be
created again at once. The request's timeout is not needed.
"""

from __future__ import annotations

import uuid
from collections import Counter

from kafka.protocol.admin import DeleteTopicsRequest, DeleteTopicsResponse

from ..errors import ApiError, kerr
from ._api import Api

API = Api(key=20, min_version=1, max_version=6, request=DeleteTopicsRequest)

Result = DeleteTopicsResponse.DeletableTopicResult
_NO_ID = uuid.UUID(int=0)


async def handle(request, version: int, state) -> DeleteTopicsResponse:
    results = []
    names = list(request.topic_names or ())
    for topic in request.topics or ():  # v6
        topic_id = topic.topic_id if topic.topic_id is not None else _NO_ID
        if topic.name is None and topic_id == _NO_ID:
            results.append(_result(None, _NO_ID, ApiError(kerr.InvalidRequestError,
                                                           "Neither topic name nor id were specified.")))
        elif topic.name is None:
            found = state.topics.by_id(topic_id)
            if found is None:
                results.append(_result(None, topic_id, ApiError(kerr.UnknownTopicIdError,
                                                                "This server does not host this topic ID.")))
            else:
                state.topics.delete(found.name)
                results.append(_result(found.name, topic_id, None))
        elif topic_id != _NO_ID:
            results.append(_result(topic.name, topic_id, ApiError(kerr.InvalidRequestError,
                                                                  "You may not specify both topic name and topic id.")))
        else:
            names.append(topic.name)
    named = Counter(names)
    for name in named:
        error = None
        topic_id = state.topics.topics[name].topic_id if name in state.topics.topics else _NO_ID
        try:
            if named[name] > 1:
                raise ApiError(kerr.InvalidRequestError, "Duplicate topic name.")
            state.topics.delete(name)
        except ApiError as exc:
            error = exc
        results.append(_result(name, topic_id if error is None else _NO_ID, error))
    return DeleteTopicsResponse(version=version, throttle_time_ms=0, responses=results)


def _result(name: str | None, topic_id: uuid.UUID, error: ApiError | None) -> Result:
    return Result(name=name, topic_id=topic_id, error_code=error.code if error else 0,
                  error_message=error.message if error else None)
