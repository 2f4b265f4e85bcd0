"""``kmirror run``: mirror topics from one cluster to another with Spark Structured Streaming.

Every setting can come from a TOML file (``--config``, keys as in docs/configuration.md);
flags given on the command line override it. Exit codes: 0 done (``--once`` caught up, or
stopped by SIGTERM/SIGINT after the current micro-batch), 1 the copy failed (corrupt source
batch, data loss, a broker error), 2 invalid configuration, a destination topic that cannot take
its source's partitions, a cluster unreachable at start, credentials or certificates refused,
or an outage longer than --max-outage.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from pathlib import Path

from kcodecs import KMirrorError

__all__ = ["add_arguments", "run", "overrides_from_args", "CLUSTER_FLAGS", "EXIT_FAILED", "EXIT_UNUSABLE"]

log = logging.getLogger("kmirror")

EXIT_FAILED = 1
EXIT_UNUSABLE = 2
"""Bad configuration, refused credentials or an unreachable cluster: nothing was attempted."""

_FLAGS = {
    # flag dest -> dotted config key
    "source": "source.bootstrap",
    "destination": "destination.bootstrap",
    "topics": "topics",
    "exclude": "exclude",
    "rename": "rename",
    "replication_policy": "replication_policy",
    "source_alias": "source_alias",
    "destination_alias": "destination_alias",
    "sync_topic_configs": "sync_topic_configs",
    "sync_topic_configs_interval": "sync_topic_configs_interval_s",
    "config_properties_exclude": "config_properties_exclude",
    "sync_topic_acls": "sync_topic_acls",
    "sync_existing_topics": "sync_existing_topics",
    "partitioning": "partitioning",
    "compression": "compression",
    "coalesce_below_bytes": "coalesce_below_bytes",
    "destination_partitions": "destination_partitions",
    "starting_offsets": "starting_offsets",
    "on_data_loss": "on_data_loss",
    "groups": "groups",
    "sync_group_offsets_interval": "sync_group_offsets_interval_s",
    "delivery": "delivery",
    "name": "name",
    "transaction_timeout": "transaction_timeout_s",
    "checkpoint": "checkpoint",
    "once": "once",
    "trigger_interval": "trigger_interval_s",
    "copy_between_micro_batches": "copy_between_micro_batches",
    "commit_interval_ms": "commit_interval_ms",
    "max_outage": "max_outage_s",
    "max_bytes_per_trigger": "max_bytes_per_trigger",
    "max_records_per_trigger": "max_records_per_trigger",
    "fetch_max_bytes": "fetch_max_bytes",
    "max_buffer_bytes": "max_buffer_bytes",
    "max_in_flight": "max_in_flight",
    "copy_tasks": "copy_tasks",
    "master": "master",
    "metrics_port": "metrics_port",
}

_SECURITY_FLAGS = {
    # flag after --source- / --destination- -> (key in the cluster's table, metavar, help)
    "security-protocol": ("security_protocol", "PROTOCOL", "PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL"),
    "sasl-mechanism": ("sasl.mechanism", "MECHANISM", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
    "sasl-username": ("sasl.username", "USER", "SASL user name"),
    "sasl-password-env": ("sasl.password_env", "VAR",
                          "environment variable holding the SASL password (passwords are never flags)"),
    "tls-ca-file": ("tls.ca_file", "FILE", "PEM CA certificates that sign the brokers' certificates"),
    "tls-cert-file": ("tls.cert_file", "FILE", "PEM client certificate, for brokers that require one (mTLS)"),
    "tls-key-file": ("tls.key_file", "FILE", "PEM private key of the client certificate, if not in its file"),
}
for _cluster in ("source", "destination"):
    for _flag, (_key, _, _) in _SECURITY_FLAGS.items():
        _FLAGS[f"{_cluster}_{_flag.replace('-', '_')}"] = f"{_cluster}.{_key}"

CLUSTER_FLAGS = frozenset(dest for dest, key in _FLAGS.items() if key.startswith(("source.", "destination.")))
"""The argparse dests of the options that say how to reach the two clusters (bootstrap and
security): what another command sharing :func:`add_arguments` needs to connect."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_argument_group("clusters and topics")
    where.add_argument("--source", metavar="HOST:PORT[,...]", help="bootstrap brokers of the cluster to copy from")
    where.add_argument("--destination", metavar="HOST:PORT[,...]", help="bootstrap brokers of the cluster to copy to")
    where.add_argument("--topics", metavar="REGEX", help="source topics to mirror (whole-name match); internal __ topics never are")
    where.add_argument("--exclude", metavar="REGEX", help="source topics to leave out, even if --topics matches")
    where.add_argument("--rename", metavar="FORMAT", help="destination topic name over {topic}, e.g. 'src.{topic}' (default '{topic}')")
    where.add_argument("--replication-policy", choices=("identity", "prefix"),
                       help="destination names as MirrorMaker 2's policies: identity (default), the source's name; "
                            "prefix, '<source alias>.<name>'. Either way, topics mirrored from the destination are "
                            "never mirrored back to it (active-active)")
    where.add_argument("--source-alias", metavar="NAME",
                       help="the source cluster's name in prefixed topic names (default: from its bootstrap address)")
    where.add_argument("--destination-alias", metavar="NAME",
                       help="the destination cluster's name, to recognise prefixed topics that came from it "
                            "(default: from its bootstrap address)")
    where.add_argument("--groups", metavar="REGEX",
                       help="consumer groups whose committed offsets are translated to the destination, exactly "
                            "where the data was forwarded (default: none)")
    where.add_argument("--sync-group-offsets-interval", type=float, metavar="SECONDS",
                       help="how often group offsets are translated (default 60)")
    shape = parser.add_argument_group("keeping the destination shaped like the source")
    shape.add_argument("--no-sync-topic-configs", dest="sync_topic_configs", action="store_false", default=None,
                       help="create topics with the source's configs, but do not sync later changes (MirrorMaker 2's "
                            "sync.topic.configs.enabled=false)")
    shape.add_argument("--sync-topic-configs-interval", type=float, metavar="SECONDS",
                       help="how often topic configs and ACLs are synced (default 600, as MirrorMaker 2)")
    shape.add_argument("--config-properties-exclude", metavar="REGEX[,...]",
                       help="topic configs never synced, comma-separated regular expressions (default: MirrorMaker "
                            "2's list, with message.timestamp.type synced; see docs/configuration.md)")
    shape.add_argument("--no-sync-topic-acls", dest="sync_topic_acls", action="store_false", default=None,
                       help="do not copy topic ACLs (copied by default, read-only: WRITE left out, ALL made READ)")
    shape.add_argument("--sync-existing-topics", action="store_true", default=None,
                       help="also sync configs and ACLs of destination topics that were there before kmirror "
                            "(by default kmirror reshapes only the topics it created; it never adds partitions to "
                            "one it did not)")
    how = parser.add_argument_group("routing")
    how.add_argument("--partitioning", choices=("auto", "by-key", "preserve"),
                     help="auto (default): preserve where source and destination topics have the same partition "
                          "count (as MirrorMaker 2), else by-key, decided when the job first sees a topic and kept "
                          "at the destination. by-key: murmur2(key) mod destination partitions, as "
                          "Kafka's default partitioner; keyless batches are forwarded unopened. preserve: same "
                          "partition number, never decompresses")
    how.add_argument("--compression", choices=("source", "none", "gzip", "snappy", "lz4", "zstd"),
                     help="destination codec; 'source' (default) keeps each batch's codec so batches pass through. "
                          "Any other value rebuilds batches in a different codec")
    how.add_argument("--coalesce-below-bytes", type=int, metavar="N",
                     help="merge source batches smaller than N bytes with the small batches after them in the same "
                          "fetch, up to coalesce_target_bytes (64 KiB), into one destination batch: tiny batches "
                          "from low-traffic producers then cost the destination and its consumers as few large "
                          "ones do (default 4096; 0: forward every batch as it is)")
    how.add_argument("--destination-partitions", type=int, metavar="N",
                     help="partitions of destination topics kmirror creates (default: the source topic's count)")
    run = parser.add_argument_group("streaming")
    run.add_argument("--checkpoint", type=Path, metavar="DIR",
                     help="Spark checkpoint directory; restarting with the same one resumes where the job stopped "
                          "(default ./kmirror-checkpoint)")
    run.add_argument("--once", action="store_true", default=None,
                     help="copy everything there is now, then exit 0 (Trigger.AvailableNow)")
    run.add_argument("--trigger-interval", type=float, metavar="SECONDS",
                     help="how often the long-running job plans a micro-batch: checkpoints its offsets, renews the "
                          "copiers' leases, logs progress (default 1); copying does not wait for it")
    run.add_argument("--commit-interval-ms", type=int, metavar="MS",
                     help="a caught-up copier commits this often, the most a record waits for its commit "
                          "(default 20)")
    run.add_argument("--no-copy-between-micro-batches", dest="copy_between_micro_batches", action="store_false",
                     default=None,
                     help="copy each micro-batch's ranges in its tasks only, as before resident copiers: records "
                          "then wait for the next trigger")
    run.add_argument("--max-bytes-per-trigger", type=int, metavar="N", help="approximate cap on source bytes per micro-batch")
    run.add_argument("--max-records-per-trigger", type=int, metavar="N", help="cap on source offsets per micro-batch")
    run.add_argument("--starting-offsets", metavar="earliest|latest|TIME",
                     help="where a job without a checkpoint starts: earliest (default), latest, or a time, ISO-8601 "
                          "(2026-11-23T08:00:00Z; UTC without a zone) or milliseconds since the epoch: each "
                          "partition's first record stamped at or after it")
    run.add_argument("--on-data-loss", choices=("fail", "skip-to-earliest"),
                     help="if retention deleted source data before it was copied: fail (default), or warn loudly, "
                          "count the lost records and go on from the earliest offset")
    run.add_argument("--delivery", choices=("exactly-once", "at-least-once"),
                     help="exactly-once (default): each copy task commits its records and the source offsets they "
                          "reach in one destination transaction, so read_committed consumers see every record once "
                          "through crashes and restarts; at-least-once: no transactions, a crashed micro-batch "
                          "is copied again")
    run.add_argument("--name", metavar="NAME",
                     help="the job's name at the destination (offsets topic kmirror-offsets.NAME, transactional ids "
                          "NAME-<task>); unique per destination cluster (default: derived from --checkpoint)")
    run.add_argument("--transaction-timeout", type=float, metavar="SECONDS",
                     help="exactly-once: the destination aborts a copy task's transaction left open longer (default 60)")
    run.add_argument("--max-outage", type=float, metavar="SECONDS",
                     help="how long an unreachable or leaderless cluster is waited out, retrying with backoff, "
                          "before the job fails (default: no limit; 300 with --once; inf: no limit)")
    run.add_argument("--fetch-max-bytes", type=int, metavar="N",
                     help="bytes per fetch request, each partition up to an equal share; a task fetches again only while "
                          "less than this waits for the destination (default 4 MiB)")
    run.add_argument("--max-buffer-bytes", type=int, metavar="N",
                     help="per copy task, bytes of fetch buffers and rebuilt batches not yet acknowledged by the "
                          "destination (default 64 MiB)")
    run.add_argument("--max-in-flight", type=int, metavar="N",
                     help="produce requests in flight per destination broker, 1 to 5 (default 5)")
    run.add_argument("--copy-tasks", type=int, metavar="N",
                     help="Spark tasks per micro-batch, each copying the partitions of one source leader or a share "
                          "of them (default: Spark's default parallelism)")
    run.add_argument("--master", metavar="URL", help="Spark master (default local[2])")
    run.add_argument("--metrics-port", type=int, metavar="PORT",
                     help="serve Prometheus metrics (records, bytes, lag, replication latency, errors) from the "
                          "driver on http://0.0.0.0:PORT/metrics (default: off; see docs/metrics.md)")
    run.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                     help="extra Spark setting, repeatable (e.g. spark.executor.memory=4g)")
    security = parser.add_argument_group("security (per cluster; see docs/configuration.md)")
    for cluster in ("source", "destination"):
        for flag, (_, metavar, text) in _SECURITY_FLAGS.items():
            security.add_argument(f"--{cluster}-{flag}", metavar=metavar, help=f"{cluster}: {text}")
    parser.add_argument("--config", type=Path, metavar="FILE", help="TOML file with any of the settings above")


def overrides_from_args(args: argparse.Namespace) -> dict[str, object]:
    """Command-line values as dotted config keys; flags not given are None and do not override."""
    overrides = {key: getattr(args, dest) for dest, key in _FLAGS.items()}
    conf = {}
    for item in args.spark_conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"--spark-conf expects KEY=VALUE, got {item!r}")
        conf[key] = value
    if conf:
        overrides["spark_conf"] = conf
    return overrides


def run(args: argparse.Namespace) -> int:
    from .config import ConfigError, load_config
    from .engine import TopicMismatchError
    from .kafka import AuthenticationError, ClusterUnreachableError

    try:
        config = load_config(args.config, overrides_from_args(args))
    except (ConfigError, argparse.ArgumentTypeError) as exc:
        log.error("%s", exc)
        return EXIT_UNUSABLE
    stop = threading.Event()

    def request_stop(signum, _frame) -> None:
        log.info("%s received: stopping after the current micro-batch", signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, request_stop)
    from .spark.job import MirrorJobError, run_mirror

    try:
        run_mirror(config, stop=stop)
    except (ClusterUnreachableError, AuthenticationError) as exc:
        log.error("%s", exc)
        return EXIT_UNUSABLE
    except MirrorJobError as exc:
        log.error("mirror failed: %s", exc)
        unusable = (ClusterUnreachableError.__name__, AuthenticationError.__name__, TopicMismatchError.__name__)
        return EXIT_UNUSABLE if exc.kind in unusable else EXIT_FAILED
    except TopicMismatchError as exc:
        log.error("%s", exc)
        return EXIT_UNUSABLE
    except KMirrorError as exc:
        log.error("mirror failed: %s", exc)
        return EXIT_FAILED
    return 0
