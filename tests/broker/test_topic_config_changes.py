"""TopicConfig.incremental: IncrementalAlterConfigs' operations on a topic's dynamic configs
(Kafka's ``ConfigurationControlManager.incrementalAlterConfigResource``), table-tested."""

from __future__ import annotations

import pytest

from mirror.broker.errors import ApiError, kerr
from mirror.broker.topic_config import TopicConfig
from mirror.protocol.configs import ConfigChange, ConfigOp

SET, DELETE, APPEND, SUBTRACT = ConfigOp.SET, ConfigOp.DELETE, ConfigOp.APPEND, ConfigOp.SUBTRACT
DYNAMIC = {"retention.ms": "3600000", "segment.bytes": "1048576"}
START = TopicConfig.from_kafka(DYNAMIC)


@pytest.mark.parametrize("changes, dynamic", [
    ([("retention.bytes", SET, "1000")], {**DYNAMIC, "retention.bytes": "1000"}),
    ([("retention.ms", DELETE, None)], {"segment.bytes": "1048576"}),
    ([("segment.ms", DELETE, None)], DYNAMIC),  # never set: no error, as in Kafka
    ([("retention.ms", DELETE, None), ("segment.bytes", DELETE, None)], {}),
    ([("cleanup.policy", APPEND, "compact")], {**DYNAMIC, "cleanup.policy": "delete,compact"}),  # from the default
    ([("cleanup.policy", APPEND, "delete")], DYNAMIC),  # already there
    ([("cleanup.policy", SET, "compact"), ("retention.ms", SET, "604800000")],  # back at its default: not dynamic
     {"cleanup.policy": "compact", "segment.bytes": "1048576"}),
], ids=["set", "delete", "delete-unset", "delete-all", "append", "append-present", "set-default"])
def test_operations_change_the_dynamic_configs(changes, dynamic):
    changed = START.incremental([ConfigChange(name, op, value) for name, op, value in changes])
    assert changed.explicit() == dynamic
    assert START.explicit() == DYNAMIC  # a new config; the old one is unchanged


def test_subtract_removes_list_items_and_keeps_the_rest():
    both = TopicConfig.from_kafka({"cleanup.policy": "compact,delete"})
    assert both.incremental([ConfigChange("cleanup.policy", SUBTRACT, "delete")]).cleanup_policy == "compact"
    assert both.incremental([ConfigChange("cleanup.policy", SUBTRACT, "absent")]).cleanup_policy == "compact,delete"


@pytest.mark.parametrize("change, error, message", [
    (("retention.ms", APPEND, "1"), kerr.InvalidConfigurationError,
     "Can't APPEND to key retention.ms because its type is not LIST."),
    (("compression.type", SUBTRACT, "gzip"), kerr.InvalidConfigurationError,
     "Can't SUBTRACT to key compression.type because its type is not LIST."),
    (("no.such.config", SET, "1"), kerr.InvalidConfigurationError, "unknown topic config 'no.such.config'"),
    (("segment.bytes", SET, "big"), kerr.InvalidConfigurationError, "invalid value 'big' for segment.bytes"),
    (("cleanup.policy", SUBTRACT, "delete"), kerr.InvalidConfigurationError, "invalid value '' for cleanup.policy"),
    (("retention.ms", 7, "1"), kerr.InvalidRequestError, "Unknown operations type 7"),
], ids=["append-long", "subtract-string", "unknown-name", "bad-value", "empty-policy", "unknown-op"])
def test_what_kafka_refuses_raises_its_error(change, error, message):
    with pytest.raises(ApiError) as raised:
        START.incremental([ConfigChange(*change)])
    assert raised.value.error is error and raised.value.message.startswith(message)
