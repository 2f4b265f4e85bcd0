"""The ``kmirror`` command line: one subcommand per job, each defined next to its code.

Subcommands are imported only when chosen: ``kmirror run`` loads the mirror, not the
benchmarks, the demo or the embedded broker (the workshop stays out of the product's path;
tests/cli/test_cli_imports.py holds it to that). ``--help`` lists every command from the
summaries here, without importing any.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from typing import Sequence

from . import logs


@dataclass(frozen=True)
class _Command:
    """A subcommand: the module that defines it (its ``add_arguments``, its ``run`` and, unless
    ``description`` says otherwise, its docstring as what ``--help`` prints), and its summary."""

    module: str
    summary: str
    description: str | None = None


_COMMANDS: dict[tuple[str, ...], _Command | str] = {
    ("run",): _Command("mirror.run_cli", "mirror topics between clusters with Spark Structured Streaming"),
    ("pack",): _Command("mirror.pack_cli", "pack this kmirror and its dependencies for Spark workers that do not "
                        "have it (kmirror run --ship-environment)"),
    ("submit-file",): _Command("mirror.submit_file_cli", "print the application file spark-submit runs kmirror "
                               "from: spark-submit ... \"$(kmirror submit-file)\" run ..."),
    ("status",): _Command("mirror.status_cli", "how far behind a mirror is, from the clusters, with no running job"),
    ("verify",): _Command("mirror.verify.cli", "prove on Spark that the destination holds exactly what the job copied"),
    ("failover",): _Command("mirror.failover_cli", "promote the destination after the source is lost: record where "
                            "its own records start, commit the groups' offsets there, print what never reached it"),
    ("failback",): _Command("mirror.failback_cli", "after a failover, copy home what the destination took since, "
                            "then (--finish) make the source primary again"),
    ("groups",): "consumer groups across the mirror, for a failover",
    ("groups", "translate"): _Command("mirror.groups_cli",
                                      "where consumer groups resume at the destination; --apply commits it there"),
    ("demo",): _Command("mirror.demo.cli",
                        "two embedded clusters, mixed data, a Spark mirror and a verification, in one command"),
    ("broker",): _Command("mirror.broker.cli", "run an embedded Kafka-compatible broker in the foreground",
                          description="Run an embedded Kafka-compatible broker until SIGTERM or SIGINT. It logs one "
                          "'ready' line when it accepts connections and exits 0 after a clean shutdown."),
    ("bench",): "throughput benchmarks, measured side by side",
    ("bench", "codecs"): _Command("mirror.bench.codecs_bench",
                                  "header-only vs full decoding, in-place LogAppendTime vs recompression"),
    ("bench", "broker"): _Command("mirror.bench.broker_bench", "produce and fetch throughput of the embedded broker"),
    ("bench", "mirror"): _Command("mirror.bench.mirror_bench", "pass-through vs recompress vs naive mirrors, side by side"),
    ("bench", "status"): _Command("mirror.bench.status_bench",
                                  "how long kmirror status takes for a mirror of 2,000 partitions"),
    ("bench", "verify"): _Command("mirror.bench.verify_bench",
                                  "kmirror verify's time and driver memory on a mirrored topic and on half of it"),
    ("bench", "latency"): _Command("mirror.bench.latency_bench",
                                   "replication latency under a steady load: kmirror run beside a consumer->producer loop"),
}
"""Every command by its path; a group (a path with commands under it) by its summary alone."""
_METAVARS = {(): ("command", "COMMAND"), ("groups",): ("groups_command", "SUBCOMMAND"), ("bench",): ("suite", "SUITE")}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser, with the arguments of the command ``argv`` chooses (of every command when
    ``argv`` is None: the whole reference, at the cost of importing it all)."""
    parser = argparse.ArgumentParser(prog="kmirror",
                                     description="Mirror Kafka topics without recompressing what does not need it.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    chosen = None if argv is None else [word for word in argv if not word.startswith("-")]
    _add_commands(parser, (), chosen)
    return parser


def _add_commands(parser: argparse.ArgumentParser, path: tuple[str, ...], chosen: list[str] | None) -> None:
    dest, metavar = _METAVARS[path]
    commands = parser.add_subparsers(dest=dest, metavar=metavar, required=True)
    for full, command in _COMMANDS.items():
        if full[:-1] != path:
            continue
        wanted = chosen is None or chosen[len(path):len(full)] == list(full[len(path):])
        if isinstance(command, str):
            group = commands.add_parser(full[-1], help=command)
            if wanted:
                _add_commands(group, full, chosen)
            continue
        sub = commands.add_parser(full[-1], help=command.summary, formatter_class=argparse.RawDescriptionHelpFormatter)
        if wanted:
            module = importlib.import_module(command.module)
            sub.description = command.description or module.__doc__
            module.add_arguments(sub)
            sub.set_defaults(run=module.run)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    logs.configure(args.verbose)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
