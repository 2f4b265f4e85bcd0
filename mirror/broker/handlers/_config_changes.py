"""What AlterConfigs (33) and IncrementalAlterConfigs (44) share: one answer per resource, after
the checks Kafka's broker makes before its controller sees a change
(``ConfigAdminManager.preprocess``), all INVALID_REQUEST:

- a resource named twice: "Each resource must appear at most once." (both answered so);
- a config named twice in a resource: "Error due to duplicate config keys";
- a null value where one is needed: "Null value not supported for : <names>";
- a BROKER resource: broker configs are this broker's command line options, none of them
  dynamic, so every change is refused as Kafka refuses a static one ("Cannot update these
  configs dynamically: ..."), after the broker id is checked as Kafka checks it (one that
  changes nothing succeeds);
- any other type but TOPIC.

A TOPIC resource then goes to :class:`~mirror.broker.topics.TopicStore`, where an unknown
topic is UNKNOWN_TOPIC_OR_PARTITION and a bad config INVALID_CONFIG.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable

from ..errors import ApiError, kerr

TOPIC, BROKER = 2, 4

Change = Callable[[str, object], None]
"""Applies one TOPIC resource (the topic's name, the request's resource) or raises :class:`ApiError`."""


def answer(request, state, response_class, change: Change, *, null_allowed: Callable[[object], bool]) -> list:
    """The responses to ``request.resources``, in order; ``null_allowed`` says which of a
    resource's configs may have a null value (IncrementalAlterConfigs' DELETE)."""
    named = Counter((resource.resource_type, resource.resource_name) for resource in request.resources)
    responses = []
    for resource in request.resources:
        error, message = 0, None
        try:
            if named[(resource.resource_type, resource.resource_name)] > 1:
                raise ApiError(kerr.InvalidRequestError, "Each resource must appear at most once.")
            _check_configs(resource.configs, null_allowed)
            topic = _topic_name(resource, state.config.node_id)
            if topic is not None:
                change(topic, resource)
        except ApiError as exc:
            error, message = exc.code, exc.message
        responses.append(response_class.AlterConfigsResourceResponse(
            error_code=error, error_message=message, resource_type=resource.resource_type,
            resource_name=resource.resource_name))
    return responses


def _check_configs(configs, null_allowed: Callable[[object], bool]) -> None:
    names = [config.name for config in configs]
    if len(set(names)) != len(names):
        raise ApiError(kerr.InvalidRequestError, "Error due to duplicate config keys")
    nulls = [config.name for config in configs if config.value is None and not null_allowed(config)]
    if nulls:
        raise ApiError(kerr.InvalidRequestError, "Null value not supported for : " + ", ".join(nulls))


def _topic_name(resource, node_id: int) -> str | None:
    """The topic a resource names, None for a broker resource without configs; :class:`ApiError`
    for a resource this broker does not change."""
    if resource.resource_type == TOPIC:
        if not resource.resource_name:
            raise ApiError(kerr.InvalidRequestError, "Default topic resources are not allowed.")
        return resource.resource_name
    if resource.resource_type == BROKER:
        if resource.resource_name not in ("", str(node_id)):
            raise ApiError(kerr.InvalidRequestError,
                           f"Unexpected broker id, expected {node_id}, but received {resource.resource_name}")
        if not resource.configs:
            return None
        names = ", ".join(sorted(config.name for config in resource.configs))
        raise ApiError(kerr.InvalidRequestError,
                       f"Cannot update these configs dynamically: {names} (this broker's configs are its command line"
                       f" options)")
    raise ApiError(kerr.InvalidRequestError, f"Unknown resource type {resource.resource_type}")
