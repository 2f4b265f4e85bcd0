"""``kmirror broker``: run one embedded broker in the foreground."""

from __future__ import annotations

import argparse
from pathlib import Path

from .security.cli import add_security_arguments, listener_security


def host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT with a port from 0 to 65535, got {value!r}")
    return host, int(port)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", type=host_port, default=("127.0.0.1", 9092), metavar="HOST:PORT",
                        help="address to bind (default 127.0.0.1:9092; port 0 picks a free port, printed in the ready line)")
    parser.add_argument("--data-dir", type=Path, required=True, metavar="DIR",
                        help="where topics live, one <topic>-<partition>/ directory each, in Kafka's layout")
    parser.add_argument("--node-id", type=int, default=0, help="broker id reported in metadata (default 0)")
    parser.add_argument("--advertised-listener", type=host_port, metavar="HOST:PORT",
                        help="address clients are told to connect to (default: the bound address)")
    parser.add_argument("--auto-create-topics", action="store_true",
                        help="create unknown topics on metadata requests, like auto.create.topics.enable (off by default)")
    parser.add_argument("--default-partitions", type=int, default=1, metavar="N",
                        help="partitions of auto-created topics (num.partitions, default 1)")
    parser.add_argument("--flush", choices=("always", "os"), default="os",
                        help="'always': fsync each append before acknowledging it; "
                             "'os': leave writes to the page cache (survives a process crash, not a power loss). Default os")
    parser.add_argument("--max-request-bytes", type=int, default=100 * 1024 * 1024, metavar="N",
                        help="largest request frame accepted (socket.request.max.bytes, default 100 MiB)")
    parser.add_argument("--producer-id-expiration-ms", type=int, default=86_400_000, metavar="MS",
                        help="forget a producer's sequence state in a partition it has not written to for this long, "
                             "unless its transaction is open there (producer.id.expiration.ms, default 86400000: a day)")
    parser.add_argument("--transactional-id-expiration-ms", type=int, default=604_800_000, metavar="MS",
                        help="forget a transactional id with no transaction and no request for this long; its next "
                             "InitProducerId gets a new producer id (transactional.id.expiration.ms, "
                             "default 604800000: 7 days; checked hourly)")
    add_security_arguments(parser)
    cleaning = parser.add_argument_group("log cleaner and retention")
    cleaning.add_argument("--no-log-cleaner", dest="log_cleaner", action="store_false",
                          help="do not compact cleanup.policy=compact topics (log.cleaner.enable=false)")
    cleaning.add_argument("--cleaner-dedupe-buffer-bytes", type=int, default=128 * 1024 * 1024, metavar="N",
                          help="memory of the cleaner's key -> offset map, 24 bytes per key "
                               "(log.cleaner.dedupe.buffer.size, default 128 MiB)")
    cleaning.add_argument("--cleaner-backoff-ms", type=int, default=15_000, metavar="MS",
                          help="cleaner sleep when no partition is dirty enough (log.cleaner.backoff.ms, default 15000)")
    cleaning.add_argument("--retention-check-interval-ms", type=int, default=300_000, metavar="MS",
                          help="how often retention runs on every partition, idle ones included "
                               "(log.retention.check.interval.ms, default 300000)")


def run(args: argparse.Namespace) -> int:
    from .cleaner import CleanerConfig
    from .embedded import run_foreground
    from .state import BrokerConfig

    host, port = args.listen
    advertised_host, advertised_port = args.advertised_listener or (None, None)
    return run_foreground(BrokerConfig(
        data_dir=args.data_dir, host=host, port=port, node_id=args.node_id,
        advertised_host=advertised_host, advertised_port=advertised_port,
        auto_create_topics=args.auto_create_topics, default_partitions=args.default_partitions,
        flush=args.flush, max_request_bytes=args.max_request_bytes, security=listener_security(args),
        cleaner=CleanerConfig(enable=args.log_cleaner, dedupe_buffer_bytes=args.cleaner_dedupe_buffer_bytes,
                              backoff_ms=args.cleaner_backoff_ms),
        retention_check_interval_ms=args.retention_check_interval_ms,
        producer_id_expiration_ms=args.producer_id_expiration_ms,
        transactional_id_expiration_ms=args.transactional_id_expiration_ms,
    ))
