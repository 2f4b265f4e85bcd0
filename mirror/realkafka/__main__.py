"""``python -m mirror.realkafka`` (``./dev kafka``): real Apache Kafka clusters on this machine,
started in the background for trying kmirror by hand, and stopped again.

    ./dev kafka start [--name a] [--nodes 1|3] [--version 4.4.0] [--authorizer]   prints the bootstrap address
    ./dev kafka status [--name a]
    ./dev kafka stop [--name a]

A cluster lives in ``<cache>/clusters/<name>`` (see :mod:`.distribution` for ``<cache>``); a
new ``start`` of the same name starts afresh, with no data.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from .cluster import KafkaCluster, distribution_for
from .distribution import KAFKA_4, KAFKA_VERSIONS, ToolchainError, cache_dir


def _home(name: str) -> Path:
    return cache_dir() / "clusters" / name


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _state(name: str) -> dict | None:
    path = _home(name) / "cluster.json"
    return json.loads(path.read_text()) if path.exists() else None


def start(args: argparse.Namespace) -> int:
    if (state := _state(args.name)) and any(_alive(n["pid"]) for n in state["nodes"]):
        print(f"cluster {args.name} is running: {state['bootstrap']['PLAINTEXT']} (stop it first)", file=sys.stderr)
        return 1
    shutil.rmtree(_home(args.name), ignore_errors=True)
    cluster = KafkaCluster(_home(args.name), nodes=args.nodes, distribution=distribution_for(args.version),
                           heap_mb=args.heap_mb, authorizer=args.authorizer)
    cluster.start()
    print(f"Kafka {args.version} cluster {args.name}: {args.nodes} node(s), bootstrap {cluster.bootstrap}")
    print(f"  logs in {cluster.directory}; stop it with ./dev kafka stop --name {args.name}")
    return 0


def status(args: argparse.Namespace) -> int:
    state = _state(args.name)
    if state is None:
        print(f"no cluster {args.name} (in {_home(args.name)})")
        return 1
    alive = [n["id"] for n in state["nodes"] if _alive(n["pid"])]
    print(f"cluster {args.name}: Kafka {state['version']}, bootstrap {state['bootstrap']['PLAINTEXT']}, "
          f"nodes running {alive or 'none'} of {[n['id'] for n in state['nodes']]}")
    return 0 if alive else 1


def stop(args: argparse.Namespace) -> int:
    state = _state(args.name)
    pids = [n["pid"] for n in (state or {"nodes": []})["nodes"] if _alive(n["pid"])]
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    print(f"cluster {args.name}: {'stopped' if pids else 'was not running'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./dev kafka", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, function, help_ in (("start", start, "start a cluster in the background"),
                                  ("status", status, "is it running, and where"),
                                  ("stop", stop, "stop it (SIGTERM, then SIGKILL after 30 s)")):
        sub = commands.add_parser(name, help=help_)
        sub.add_argument("--name", default="a", help="which cluster (default a); several may run at once")
        sub.set_defaults(function=function)
        if name == "start":
            sub.add_argument("--nodes", type=int, choices=(1, 3), default=1,
                             help="1: one broker+controller; 3: replication factor 3, min.insync.replicas 2")
            sub.add_argument("--version", choices=sorted(KAFKA_VERSIONS), default=KAFKA_4.version,
                             help=f"Apache Kafka version (default {KAFKA_4.version})")
            sub.add_argument("--heap-mb", type=int, default=512, help="each node's JVM heap (default 512)")
            sub.add_argument("--authorizer", action="store_true",
                             help="enforce ACLs (StandardAuthorizer; plaintext clients are super users)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        return args.function(args)
    except ToolchainError as exc:
        print(f"real Kafka cannot run here: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
