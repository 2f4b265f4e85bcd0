"""The job's other sections: ``[sync]`` (keeping the destination shaped like the source),
``[routing]``, ``[streaming]`` (how Spark drives the copy), ``[delivery]`` and ``[limits]``."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ..routing.policy import DEFAULT_COALESCE_BELOW_BYTES, DEFAULT_COALESCE_TARGET_BYTES
from .base import Strict, cli, compiles
from .clusters import TOPIC_CHARS

__all__ = ["time_ms", "Sync", "Routing", "Streaming", "Delivery", "Limits", "RetryConfig", "Takeover", "DEFAULT_CONFIG_EXCLUDE",
           "FETCH_MAX_BYTES", "ONCE_MAX_OUTAGE_S"]

DEFAULT_CONFIG_EXCLUDE = (
    r"follower\.replication\.throttled\.replicas",
    r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\.difference\.max\.ms",
    r"message\.timestamp\.before\.max\.ms",
    r"message\.timestamp\.after\.max\.ms",
    r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
)
"""Topic configs never synced to the destination: MirrorMaker 2's list
(``DefaultConfigPropertyFilter.CONFIG_PROPERTIES_EXCLUDE_DEFAULT``) with two differences.
``message.timestamp.type`` is synced: a LogAppendTime source must stay LogAppendTime at the
destination, or the forwarded broker times (KIP-32) would change meaning. The two limits that
replaced ``message.timestamp.difference.max.ms`` in Kafka 3.6 (KIP-937) are excluded with it.
Why each entry, in docs/configuration.md ("Topic config sync")."""

FETCH_MAX_BYTES = 4 * 1024 * 1024
"""Default ``fetch_max_bytes``: 1 MiB a partition for a task of four, Kafka's consumer default
(``max.partition.fetch.bytes``). A copy's first fetch buffers are fresh pages, each faulted in,
so a larger fetch costs more faults; 8 MiB gained no speed at any batch size (figures:
docs/performance.md, "Fetch size")."""

ONCE_MAX_OUTAGE_S = 300.0
"""``max_outage_s`` under ``once``: a one-shot copy (a cron job, a backfill) should end, not hang."""


class Sync(Strict):
    """What besides records is kept equal at the destination: topic configs and ACLs, and
    consumer groups' offsets (MirrorMaker 2's ``sync.*``)."""

    topic_configs: bool = Field(
        True, description="keep destination topic configs equal to the source's (MirrorMaker 2's "
        "sync.topic.configs.enabled): at creation, then every sync.topic_configs_interval_s",
        json_schema_extra=cli(flat="sync_topic_configs"))
    topic_configs_interval_s: float = Field(
        600.0, gt=0, description="how often topic configs (and ACLs) are synced (MirrorMaker 2's "
        "sync.topic.configs.interval.seconds)", json_schema_extra=cli(flat="sync_topic_configs_interval_s"))
    config_properties_exclude: tuple[str, ...] = Field(
        DEFAULT_CONFIG_EXCLUDE, description="regular expressions of topic config names never synced (MirrorMaker "
        "2's config.properties.exclude; default: MirrorMaker 2's list without message.timestamp.type, see "
        "docs/configuration.md)", json_schema_extra=cli("REGEX[,...]"))
    topic_acls: bool = Field(
        True, description="copy topic ACLs to the destination, WRITE left out and ALL made READ (MirrorMaker 2's "
        "sync.topic.acls.enabled); skipped quietly where a cluster has no authorizer",
        json_schema_extra=cli(flat="sync_topic_acls"))
    existing_topics: bool = Field(
        False, description="also sync the configs and ACLs of destination topics that were there before kmirror "
        "(by default a topic kmirror did not create is left as its owner shaped it; its partitions are never "
        "changed either way)", json_schema_extra=cli(flat="sync_existing_topics"))
    groups: str | None = Field(
        None, description="regular expression; consumer groups whose committed source offsets are translated and "
        "committed to the same group at the destination (MirrorMaker 2's sync.group.offsets), exactly where the "
        "data was forwarded; none by default", json_schema_extra=cli("REGEX"))
    group_offsets_interval_s: float = Field(
        60.0, ge=0, description="how often group offsets are translated (MirrorMaker 2's "
        "sync.group.offsets.interval.seconds); --once translates once more at the end",
        json_schema_extra=cli(flat="sync_group_offsets_interval_s"))

    @field_validator("groups")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            compiles(value)
        return value

    @field_validator("config_properties_exclude", mode="before")
    @classmethod
    def _regexes(cls, value: Any) -> Any:
        if isinstance(value, str):  # a flag: comma-separated, as MirrorMaker 2's list configs
            value = tuple(v.strip() for v in value.split(",") if v.strip())
        for pattern in value:
            compiles(pattern)
        return value


class Routing(Strict):
    """Which destination partition each record goes to, and in which batches and codec."""

    partitioning: Literal["auto", "by-key", "preserve"] = Field(
        "auto", description="auto: decided once per topic pair, when the job first sees it, and remembered at the "
        "destination: preserve where the destination topic has as many partitions as the source (as MirrorMaker 2 "
        "does), by-key where the counts differ; by-key: murmur2(key) mod destination partitions, like Kafka's "
        "default partitioner; preserve: destination partition = source partition (a destination topic kmirror "
        "created gets the partitions its source adds)")
    compression: Literal["source", "none", "gzip", "snappy", "lz4", "zstd"] = Field(
        "source", description="codec of the destination batches; anything but 'source' rebuilds batches in another "
        "codec")
    coalesce_below_bytes: int = Field(
        DEFAULT_COALESCE_BELOW_BYTES, ge=0, description="source batches smaller than this are merged with the small "
        "batches after them in the same fetch into one destination batch per partition (records, keys, headers and "
        "timestamps kept; recompressed): a consumer-producer mirror re-batches, and one-to-one forwarding of tiny "
        "batches pays every per-batch cost on each; 0 forwards every batch as it is (default 4096: where it was "
        "measured to pay on Apache Kafka, see docs/performance.md)")
    coalesce_target_bytes: int = Field(
        DEFAULT_COALESCE_TARGET_BYTES, ge=1024, le=1024 * 1024, description="a run of coalesced source batches "
        "stops at this many bytes (compressed, as the source wrote them)")
    coalesce_under_backlog: bool = Field(
        True, description="while a destination partition's batches queue behind its five requests in flight (a "
        "slow answer, a burst), merge every source batch smaller than coalesce_target_bytes with the ones after it, "
        "as Java's producer fills batch.size from its queue: a Produce request carries one batch per partition, so "
        "one-to-one forwarding drains a backlog only as fast as it grew; without a backlog batches go as they are")
    destination_partitions: int | None = Field(
        None, ge=1, description="partitions of created destination topics (default: the source topic's count)")
    replication_factor: int = Field(-1, description="replication factor of created destination topics (-1: broker "
                                    "default)")


def time_ms(text: str) -> int:
    """A time given as milliseconds since the epoch or in ISO 8601 (UTC unless it says), in ms.
    Raises ValueError for anything else."""
    if text.strip().isdigit():
        return int(text)
    moment = datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


RESIDENT_TRIGGER_S = 5.0
"""The long-running job's default trigger interval where resident copiers copy."""


class Streaming(Strict):
    """How Spark Structured Streaming drives the copy: where it starts, when micro-batches run,
    how many tasks copy, and the Spark settings."""

    starting_offsets: Literal["earliest", "latest"] | int = Field(
        "earliest", description="where a new job (no checkpoint) starts in each source partition: earliest, latest, "
        "or a time (ISO-8601, e.g. 2026-11-23T08:00:00Z, UTC when no zone is given; or milliseconds since the "
        "epoch): the first record stamped at or after it, found with the brokers' time index",
        json_schema_extra=cli("earliest|latest|TIME"))
    checkpoint: Path = Field(Path("kmirror-checkpoint"), description="Spark checkpoint directory (the mirror's offsets)",
                             json_schema_extra=cli("DIR"))
    once: bool = Field(False, description="copy what is there now, then exit (Trigger.AvailableNow)")
    trigger_interval_s: float | None = Field(
        None, ge=0, description="processing-time trigger interval of the long-running job (default: 5 s with resident "
        "copiers, which copy records as they arrive, so micro-batches only checkpoint the plan, lease new "
        "partitions and report; 1 s without them)", json_schema_extra=cli("SECONDS"))
    copy_between_micro_batches: bool = Field(
        True, description="long-running job: each copy task hands its ranges to a resident copier that keeps "
        "following its partitions between micro-batches, so records are copied as they arrive, not at the next "
        "trigger (false: each task copies its ranges and ends)")
    lease_s: float = Field(
        30.0, gt=0, description="how long a resident copier goes on without a micro-batch renewing its lease; the "
        "driver renews idle copiers every third of it")
    max_bytes_per_trigger: int | None = Field(None, ge=1, description="approximate cap on source bytes per micro-batch")
    max_records_per_trigger: int | None = Field(None, ge=1, description="cap on source offsets per micro-batch")
    copy_tasks: int | None = Field(
        None, ge=1, description="Spark tasks per micro-batch, each copying a group of partitions that share a "
        "source leader (default: Spark's default parallelism, the executor slots)")
    master: str = Field("local[2]", min_length=1, description="Spark master URL", json_schema_extra=cli("URL"))
    metrics_port: int | None = Field(
        None, ge=1, le=65535, description="serve Prometheus metrics from the driver on this port (none by default; "
        "see docs/metrics.md)", json_schema_extra=cli("PORT"))
    ship_environment: Path | None = Field(
        None, description="an archive made by 'kmirror pack', shipped to the executors (spark.archives) and run as "
        "their Python: for Spark clusters whose workers do not have kmirror installed at the driver's path",
        json_schema_extra=cli("FILE"))
    spark_conf: dict[str, str] = Field(default_factory=dict, description="extra Spark settings, e.g. "
                                       "spark.executor.memory", json_schema_extra=cli("KEY=VALUE"))

    @property
    def trigger_s(self) -> float:
        """The trigger interval in force: resident copiers copy between micro-batches, so a
        micro-batch a second only cost Spark's planning, checkpoint and task launches (a fifth
        of a core at 5,000 records/s, docs/performance.md) and changed no record's latency."""
        if self.trigger_interval_s is not None:
            return self.trigger_interval_s
        return RESIDENT_TRIGGER_S if self.copy_between_micro_batches else 1.0

    @field_validator("starting_offsets", mode="before")
    @classmethod
    def _starting_time(cls, value: Any) -> Any:
        if not isinstance(value, str) or value in ("earliest", "latest"):
            return value
        try:
            return time_ms(value)
        except ValueError:
            raise ValueError(f"expected earliest, latest, an ISO-8601 time or milliseconds since the epoch, "
                             f"got {value!r}") from None

    @field_validator("starting_offsets")
    @classmethod
    def _not_negative(cls, value: Any) -> Any:
        if isinstance(value, int) and value < 0:
            raise ValueError(f"a starting time must not be before 1970, got {value} ms")
        return value


class Delivery(Strict):
    """What a destination consumer is promised, the job's identity there, and what happens when
    the source lost data before it was copied."""

    mode: Literal["exactly-once", "at-least-once"] = Field(
        "exactly-once", description="exactly-once: each copy task writes its records and the source offsets they "
        "reach in one destination transaction, so read_committed consumers see every record once, even after "
        "crashes and restarts; at-least-once: no transactions, a micro-batch interrupted by a crash is copied again",
        json_schema_extra=cli(flat="delivery"))
    name: str | None = Field(
        None, description="the job's name at the destination: its offsets topic kmirror-offsets.<name> and its "
        "transactional ids <name>-<task>; unique per destination cluster (default: kmirror-<hash of the checkpoint "
        "path>, so two jobs never share one by accident)", json_schema_extra=cli("NAME"))
    transaction_timeout_s: float = Field(
        60.0, gt=0, le=900, description="exactly-once: a copy task's transaction left open longer (a dead task) is "
        "aborted by the destination (Kafka's transaction.timeout.ms; brokers cap it at 15 minutes)")
    commit_interval_ms: int = Field(
        20, ge=1, le=60_000, description="a resident copier that has caught up commits its copied records this "
        "often (exactly-once: one destination transaction each; at-least-once: a flush): the most a record waits "
        "for its commit")
    on_data_loss: Literal["fail", "skip-to-earliest"] = Field(
        "fail", description="when source data was deleted before it was copied: stop, or warn, count and go on")
    on_topic_recreated: Literal["follow", "fail"] = Field(
        "follow", description="when a source topic is deleted and made again under its name (another topic id, "
        "KIP-516): follow the new topic from its log start, with a WARN line naming both ids and where each "
        "partition restarts, or stop the job (exit 1) with that line; what was copied of the old topic stays")
    on_destination_lost: Literal["recreate", "fail"] = Field(
        "recreate", description="when a destination topic kmirror created is deleted under the job: make it again "
        "as kmirror makes it and copy its source from the log start, with one WARN line, or stop the job (exit 1) "
        "with that line. A deleted destination topic kmirror did not create is never made again: that topic "
        "fails, with one line, and the others go on")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        # It becomes part of a topic name (kmirror-offsets.<name>, at most 249 characters).
        if value is not None and not TOPIC_CHARS.fullmatch("kmirror-offsets." + value):
            raise ValueError(f"{value!r} must be letters, digits, '.', '_' or '-' (it names a topic)")
        return value


class RetryConfig(Strict):
    """Bounded exponential backoff for retriable failures (connection errors, leader changes, timeouts)."""

    attempts: int = Field(8, ge=1, description="tries per request before giving up")
    initial_backoff_s: float = Field(0.1, gt=0, description="first wait; doubles each retry")
    max_backoff_s: float = Field(5.0, gt=0, description="cap on a single wait")


class Limits(Strict):
    """How long, how much and how often: outages waited out, bytes fetched and buffered, requests
    in flight, retries. (Each cluster's request timeout is in its own table.)"""

    max_outage_s: float | None = Field(
        None, ge=0, description="how long the job waits out an unreachable or leaderless cluster, retrying with "
        "capped exponential backoff, before it fails (default: no limit for the long-running job, "
        f"{ONCE_MAX_OUTAGE_S:g} s with once; inf: no limit)")
    fetch_max_bytes: int = Field(FETCH_MAX_BYTES, ge=1024,
                                 description="bytes asked for per fetch request, each partition up to an equal share; "
                                 "a task fetches again only while less than this waits for the destination")
    max_buffer_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="per copy task: bytes of fetch buffers and rebuilt batches not yet "
        "acknowledged by the destination, at most; a slow destination slows fetching instead of growing memory")
    max_in_flight: int = Field(5, ge=1, le=5, description="produce requests in flight per destination broker "
                               "connection (the idempotent producer keeps order with up to 5, as Kafka's)")
    retry: RetryConfig = Field(default_factory=RetryConfig)

    @model_validator(mode="after")
    def _buffer_holds_a_fetch(self) -> "Limits":
        if self.max_buffer_bytes < self.fetch_max_bytes:
            raise ValueError(f"max_buffer_bytes ({self.max_buffer_bytes}) must hold at least one fetch "
                             f"(fetch_max_bytes, {self.fetch_max_bytes})")
        return self


class Takeover(Strict):
    """Taking over from a MirrorMaker 2 that copied these topics until it was stopped: a job
    with no checkpoint of its own starts each source partition just after the last offset MM2
    recorded, and keeps the groups MM2 translated. ``--mirrormaker2-config`` sets this section
    from MM2's own file; each topic's default is the name MM2 gives it (``DefaultReplicationPolicy``)."""

    mirrormaker2: bool = Field(
        False, description="a job with no checkpoint starts each source partition just after the last offset "
        "MirrorMaker 2 recorded in its offsets topic on the destination (partitions it never copied start at "
        "streaming.starting_offsets), once MM2 is found stopped (its Connect group empty, its offsets still); "
        "set by --mirrormaker2-config", json_schema_extra=cli(flat="take_over_mirrormaker2"))
    exactly_once: bool = Field(
        False, description="MirrorMaker 2 ran with exactly-once source support (KIP-618): its offsets and records "
        "committed together, so the takeover is exact; otherwise records it wrote after its last offset flush are "
        "copied again, and the log gives how many at most", json_schema_extra=cli(flat="mm2_exactly_once"))
    offsets_topic: str | None = Field(
        None, description="MirrorMaker 2's Connect offsets topic on the destination (default "
        "mm2-offsets.<source alias>.internal)", json_schema_extra=cli("TOPIC", flat="mm2_offsets_topic"))
    connect_group: str | None = Field(
        None, description="MirrorMaker 2's Connect worker group on the destination, which must have no members "
        "(default <source alias>-mm2)", json_schema_extra=cli("GROUP", flat="mm2_connect_group"))
    offset_syncs_topic: str | None = Field(
        None, description="MirrorMaker 2's offset syncs topic (default mm2-offset-syncs.<destination "
        "alias>.internal), on the cluster offset_syncs_location names", json_schema_extra=cli("TOPIC", flat="mm2_offset_syncs_topic"))
    offset_syncs_location: Literal["source", "destination"] = Field(
        "source", description="where MirrorMaker 2 kept its offset syncs (its offset-syncs.topic.location)",
        json_schema_extra=cli(flat="mm2_offset_syncs_location"))
