"""Topic configuration: the Kafka config names the broker honours, parsed and validated once.

Unknown names are rejected with INVALID_CONFIG, as Kafka does, so a typo never silently
falls back to a default. A topic's dynamic configs are the ones that differ from the
defaults (:meth:`TopicConfig.explicit`); IncrementalAlterConfigs changes them one by one
(:meth:`TopicConfig.incremental`, KIP-339), AlterConfigs replaces them all
(:meth:`TopicConfig.from_kafka`). The partition logs take only the part they act on, as a
:class:`~mirror.broker.log.log_config.LogConfig` (the topic store derives it).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Iterable, Mapping

from kcodecs import Compression, TimestampType

from ..protocol.configs import ConfigChange, ConfigOp
from .errors import ApiError, kerr

__all__ = ["TopicConfig"]

_COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
_CLEANUP_POLICIES = ("delete", "compact", "compact,delete", "delete,compact")
_TIMESTAMP_TYPES = {"CreateTime": TimestampType.CREATE_TIME, "LogAppendTime": TimestampType.LOG_APPEND_TIME}
_INT_MAX, _LONG_MAX = 2**31 - 1, 2**63 - 1
_INT_CONFIGS = ("segment.bytes", "max.message.bytes")
"""Kafka's ``Type.INT`` topic configs; every other number here is a ``LONG`` (or the ratio, a
``DOUBLE``). A value out of its type's range is INVALID_CONFIG, as Kafka's ``ConfigDef`` parses it."""
_LIST_CONFIGS = ("cleanup.policy",)
"""Kafka's ``Type.LIST`` topic configs among ours: the only ones APPEND and SUBTRACT apply to."""


@dataclass(frozen=True)
class TopicConfig:
    """Kafka topic configs, under their Python names; ``kafka_name`` maps them back."""

    message_timestamp_type: str = "CreateTime"
    compression_type: str = "producer"
    cleanup_policy: str = "delete"
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    max_message_bytes: int = 1024 * 1024 + 12
    min_cleanable_dirty_ratio: float = 0.5
    """The log cleaner skips a compacted partition until dirty bytes are this share of the cleanable log."""
    min_compaction_lag_ms: int = 0
    """A record stays uncompacted at least this long (by its segment's largest timestamp)."""
    max_compaction_lag_ms: int = 2**63 - 1
    """A dirty record is compacted within about this long: the cleaner takes an overdue partition
    at any ratio, and the active segment rolls this often (``LogConfig.maxSegmentMs``)."""
    delete_retention_ms: int = 24 * 3600 * 1000
    """How long a tombstone stays after the cleaner first sees it (its delete horizon, KIP-534)."""
    message_timestamp_before_max_ms: int = _LONG_MAX
    """On a CreateTime topic, how far behind the broker's clock a record's time may be (KIP-937): no limit."""
    message_timestamp_after_max_ms: int = 3_600_000
    """On a CreateTime topic, how far ahead of the broker's clock a record's time may be (KIP-937):
    an hour, Kafka 4's default (KIP-1030; Kafka 3 had no limit)."""

    @staticmethod
    def kafka_name(python_name: str) -> str:
        return python_name.replace("_", ".")

    @classmethod
    def from_kafka(cls, configs: Mapping[str, str | None]) -> "TopicConfig":
        """Parse ``{"segment.bytes": "1048576", ...}``; raise INVALID_CONFIG naming the bad entry."""
        known = {cls.kafka_name(f.name): f for f in fields(cls)}
        values: dict[str, object] = {}
        for name, raw in configs.items():
            field = known.get(name)
            if field is None:
                raise ApiError(kerr.InvalidConfigurationError, f"unknown topic config {name!r}")
            if raw is None:
                continue
            values[field.name] = _parse(name, raw, field.type)
        config = cls(**values)  # type: ignore[arg-type]
        config.check()
        return config

    def check(self) -> None:
        for f in fields(self):
            value, name = getattr(self, f.name), self.kafka_name(f.name)
            limit = _INT_MAX if name in _INT_CONFIGS else _LONG_MAX
            if isinstance(value, int) and not -limit - 1 <= value <= limit:
                raise _invalid(name, value, f"a number of type {'INT' if limit == _INT_MAX else 'LONG'}")
        if self.message_timestamp_type not in _TIMESTAMP_TYPES:
            raise _invalid("message.timestamp.type", self.message_timestamp_type, "CreateTime or LogAppendTime")
        if self.compression_type not in _COMPRESSION_TYPES:
            raise _invalid("compression.type", self.compression_type, ", ".join(_COMPRESSION_TYPES))
        if self.cleanup_policy not in _CLEANUP_POLICIES:
            raise _invalid("cleanup.policy", self.cleanup_policy, "delete, compact or compact,delete")
        if self.segment_bytes < 14:
            raise _invalid("segment.bytes", self.segment_bytes, "at least 14")
        if self.segment_ms < 1:
            raise _invalid("segment.ms", self.segment_ms, "at least 1")
        if self.retention_ms < -1 or self.retention_bytes < -1:
            raise _invalid("retention.ms/retention.bytes", (self.retention_ms, self.retention_bytes), "-1 or more")
        if self.max_message_bytes < 0:
            raise _invalid("max.message.bytes", self.max_message_bytes, "0 or more")
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise _invalid("min.cleanable.dirty.ratio", self.min_cleanable_dirty_ratio, "between 0 and 1")
        if self.min_compaction_lag_ms < 0 or self.delete_retention_ms < 0:
            raise _invalid("min.compaction.lag.ms/delete.retention.ms",
                           (self.min_compaction_lag_ms, self.delete_retention_ms), "0 or more")
        if self.message_timestamp_before_max_ms < 0 or self.message_timestamp_after_max_ms < 0:
            raise _invalid("message.timestamp.before.max.ms/message.timestamp.after.max.ms",
                           (self.message_timestamp_before_max_ms, self.message_timestamp_after_max_ms), "0 or more")
        if self.max_compaction_lag_ms < max(1, self.min_compaction_lag_ms):
            raise _invalid("max.compaction.lag.ms", self.max_compaction_lag_ms,
                           f"at least 1 and at least min.compaction.lag.ms ({self.min_compaction_lag_ms})")

    def incremental(self, changes: Iterable[ConfigChange]) -> "TopicConfig":
        """This config with ``changes`` applied to its dynamic configs, validated as a whole.

        Kafka's ``incrementalAlterConfigResource``: SET replaces a value, DELETE drops it (a
        name never set is no error), APPEND and SUBTRACT edit the items of a list config,
        starting from its current value or default. An unknown operation is INVALID_REQUEST;
        APPEND or SUBTRACT on a config that is not a list, an unknown name or a bad result
        INVALID_CONFIG.
        """
        dynamic: dict[str, str | None] = dict(self.explicit())
        defaults = TopicConfig().as_kafka()
        for change in changes:
            try:
                op = ConfigOp(change.op)
            except ValueError as exc:
                raise ApiError(kerr.InvalidRequestError, f"Unknown operations type {change.op}") from exc
            if op is ConfigOp.SET:
                dynamic[change.name] = change.value
            elif op is ConfigOp.DELETE:
                dynamic.pop(change.name, None)
            elif change.name not in _LIST_CONFIGS:
                raise ApiError(kerr.InvalidConfigurationError,
                               f"Can't {op.name} to key {change.name} because its type is not LIST.")
            else:
                current = dynamic.get(change.name) or defaults[change.name]
                items = [item for item in current.split(",") if item]
                for item in (change.value or "").split(","):
                    if op is ConfigOp.APPEND and item not in items:
                        items.append(item)
                    elif op is ConfigOp.SUBTRACT and item in items:
                        items.remove(item)
                dynamic[change.name] = ",".join(items)
        return TopicConfig.from_kafka(dynamic)

    def as_kafka(self) -> dict[str, str]:
        return {self.kafka_name(f.name): str(getattr(self, f.name)) for f in fields(self)}

    def explicit(self) -> dict[str, str]:
        """Only the configs that differ from the defaults (what DescribeConfigs reports as dynamic)."""
        default = TopicConfig()
        return {self.kafka_name(f.name): str(getattr(self, f.name)) for f in fields(self)
                if getattr(self, f.name) != getattr(default, f.name)}

    @property
    def compacted(self) -> bool:
        """``compact`` or ``compact,delete``: the log cleaner keeps the last record of each key."""
        return "compact" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """How long the active segment may stay open: a compacted topic also rolls at
        ``max.compaction.lag.ms``, else its newest records could never be cleaned (Kafka's ``maxSegmentMs``)."""
        return min(self.segment_ms, self.max_compaction_lag_ms) if self.compacted else self.segment_ms

    @property
    def timestamp_type(self) -> TimestampType:
        return _TIMESTAMP_TYPES[self.message_timestamp_type]

    @property
    def target_compression(self) -> Compression | None:
        """The codec the broker must store, or None to keep the producer's (``producer``)."""
        if self.compression_type == "producer":
            return None
        return Compression.NONE if self.compression_type == "uncompressed" else Compression.parse(self.compression_type)


def _parse(name: str, raw: str, kind: object) -> object:
    for type_, label in ((int, "an integer"), (float, "a number")):
        if kind in (type_, type_.__name__):
            try:
                return type_(raw)
            except ValueError as exc:
                raise _invalid(name, raw, label) from exc
    return raw


def _invalid(name: str, value: object, expected: str) -> ApiError:
    return ApiError(kerr.InvalidConfigurationError, f"invalid value {value!r} for {name}: expected {expected}")
