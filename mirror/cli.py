"""The ``kmirror`` command line: one subcommand per job, each defined next to its code."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from .bench import broker_bench, codecs_bench, latency_bench, mirror_bench
from . import groups_cli, logs, run_cli
from .broker import cli as broker_cli
from .demo import cli as demo_cli


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kmirror",
        description="Mirror Kafka topics without recompressing what does not need it.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    _command(commands, "run", run_cli, "mirror topics between clusters with Spark Structured Streaming")
    groups = commands.add_parser("groups", help="consumer groups across the mirror, for a failover")
    group_commands = groups.add_subparsers(dest="groups_command", metavar="SUBCOMMAND", required=True)
    _command(group_commands, "translate", groups_cli,
             "where consumer groups resume at the destination; --apply commits it there")
    _command(commands, "demo", demo_cli,
             "two embedded clusters, mixed data, a Spark mirror and a verification, in one command")

    broker = commands.add_parser(
        "broker",
        help="run an embedded Kafka-compatible broker in the foreground",
        description="Run an embedded Kafka-compatible broker until SIGTERM or SIGINT. It logs one "
        "'ready' line when it accepts connections and exits 0 after a clean shutdown.",
    )
    broker_cli.add_arguments(broker)
    broker.set_defaults(run=broker_cli.run)

    bench = commands.add_parser("bench", help="throughput benchmarks, measured side by side")
    suites = bench.add_subparsers(dest="suite", metavar="SUITE", required=True)
    for name, module, summary in (
        ("codecs", codecs_bench, "header-only vs full decoding, in-place LogAppendTime vs recompression"),
        ("broker", broker_bench, "produce and fetch throughput of the embedded broker"),
        ("mirror", mirror_bench, "pass-through vs recompress vs naive mirrors, side by side"),
        ("latency", latency_bench, "replication latency under a steady load: kmirror run beside a consumer->producer loop"),
    ):
        _command(suites, name, module, summary)
    return parser


def _command(commands, name: str, module, summary: str) -> None:
    """A subcommand defined by ``module``: its ``add_arguments`` and ``run``, its docstring as
    the description that ``--help`` prints."""
    command = commands.add_parser(name, help=summary, description=module.__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    module.add_arguments(command)
    command.set_defaults(run=module.run)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.configure(args.verbose)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
