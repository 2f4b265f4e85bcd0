"""MirrorMaker 2 itself, as a mode of ``kmirror bench mirror``: the peer kmirror means to beat.

Real MirrorMaker 2 from ``org.apache.kafka:connect-mirror`` (:data:`MM2`, fetched by Maven like
the brokers, :mod:`mirror.realkafka.distribution`), run in dedicated mode as Kafka's
``connect-mirror-maker.sh`` runs it: ``org.apache.kafka.connect.mirror.MirrorMaker`` on a
properties file, with the script's default heap. The configuration (:func:`properties`) is
what Kafka's geo-replication docs describe, and otherwise MM2's and Connect's shipped defaults:

- one flow, ``source->target``, of the one bench topic, under ``IdentityReplicationPolicy``
  (the destination topic is named as the source's, partition for partition);
- ``tasks.max`` = the source's partitions: a task per partition, MM2's widest;
- heartbeats and checkpoints off (the bench measures the data path; kmirror's bench modes
  write neither);
- replication factor 1 for MM2's internal topics, as the bench's clusters have one broker;
- ``mirrormaker2-eos``: exactly-once source support (KIP-618) as the docs give it for dedicated
  mode: ``target.exactly.once.source.support = enabled``, the internal REST server that needs
  (``dedicated.mode.enable.internal.rest``, a loopback ``listeners``), and the source read
  ``read_committed``.

Connect's producer defaults stay, ``compression.type=none`` among them: MM2 as shipped writes
uncompressed destination batches, whatever the source's codec.

Each run uses a source alias of its own, so MM2's internal topics (its source offsets among
them) are fresh, and the caller hands it an empty destination topic. What is timed runs from
the first record the destination holds to the last (MM2's start, a dozen seconds of Connect
and task assignment, is not); CPU seconds and peak RSS are the MM2 JVM's over that span
(:class:`~.proctree.TreeMeter`).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

from ..kafka import READ_COMMITTED, KafkaClient, TopicPartition
from ..realkafka.distribution import Distribution, java_command
from .proctree import TreeMeter
from .stats import Sample
from .worker import ModeRun

__all__ = ["MM2", "MAIN", "MODES", "properties", "copy_mirrormaker", "MirrorMakerError"]

MM2 = Distribution("connect-mirror", "4.3.1")
"""connect-mirror 4.4.0 is not on Maven Central here; 4.3.1 talks to 4.4 brokers as any 4.x client."""
MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"
HEAP = ("-Xms256M", "-Xmx2G")
"""``connect-mirror-maker.sh``'s default ``KAFKA_HEAP_OPTS``."""
MODES = ("mirrormaker2", "mirrormaker2-eos")
TARGET = "target"
_POLL_S = 0.02
_START_TIMEOUT_S = 180.0
_STALL_S = 60.0
_SETTLE_S = 2.0
"""Exactly-once: the destination's end must stay put this long, stable, before the copy counts as done."""


class MirrorMakerError(RuntimeError):
    """MirrorMaker 2 exited, or copied nothing, or stalled: the run is broken, not slow."""


def properties(spec: ModeRun, *, exactly_once: bool, alias: str, rest_port: int | None = None) -> dict[str, str]:
    """The dedicated-mode configuration of one run (see the module's docstring)."""
    flow = f"{alias}->{TARGET}"
    config = {
        "clusters": f"{alias}, {TARGET}",
        f"{alias}.bootstrap.servers": spec.source,
        f"{TARGET}.bootstrap.servers": spec.destination,
        f"{flow}.enabled": "true",
        f"{flow}.topics": re.escape(spec.source_topic),
        f"{TARGET}->{alias}.enabled": "false",
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "tasks.max": str(len(spec.end_offsets)),
        "emit.heartbeats.enabled": "false",
        "emit.checkpoints.enabled": "false",
        "sync.group.offsets.enabled": "false",
    }
    for topic in ("replication.factor", "offset-syncs.topic.replication.factor", "heartbeats.topic.replication.factor",
                  "checkpoints.topic.replication.factor", "offset.storage.replication.factor",
                  "status.storage.replication.factor", "config.storage.replication.factor"):
        config[topic] = "1"
    if exactly_once:
        if rest_port is None:
            raise ValueError("exactly-once MirrorMaker 2 needs its internal REST port")
        config.update({
            f"{TARGET}.exactly.once.source.support": "enabled",
            "dedicated.mode.enable.internal.rest": "true",
            "listeners": f"http://127.0.0.1:{rest_port}",
            f"{alias}.consumer.isolation.level": "read_committed",
        })
    return config


def copy_mirrormaker(spec: ModeRun) -> Sample:
    """Run MirrorMaker 2 on ``spec`` until the destination holds every record; measure it."""
    exactly_once = spec.mode == "mirrormaker2-eos"
    work = Path(spec.work_dir)
    alias = "source" + re.sub(r"\W", "", work.name)  # fresh internal topics for every run
    config = properties(spec, exactly_once=exactly_once, alias=alias, rest_port=_free_port() if exactly_once else None)
    config_file = work / "mm2.properties"
    config_file.write_text("".join(f"{key} = {value}\n" for key, value in config.items()))
    logging_file = work / "log4j2.properties"
    logging_file.write_text(_LOG4J2.format(file=work / "mm2.log"))
    libs = MM2.resolve()
    java = java_command()
    if java is None:
        raise MirrorMakerError("no Java to run MirrorMaker 2")
    partitions = [TopicPartition(spec.destination_topic, p) for p in range(spec.destination_partitions)]
    with open(work / "mm2.out", "wb") as out:
        process = subprocess.Popen([java, *HEAP, "-XX:+UseG1GC", "-Djava.awt.headless=true",
                                    f"-Dlog4j2.configurationFile={logging_file}", "-cp", f"{libs}/*", MAIN,
                                    str(config_file)], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    try:
        with KafkaClient(spec.destination) as client:
            began = _wait_first(client, partitions, process, work)
            with TreeMeter(process.pid) as meter:
                ended = _wait_last(client, partitions, spec.records, exactly_once, process, work)
        return Sample(ended - began, meter.cpu_s, meter.peak_rss_bytes)
    finally:
        _stop(process)


def _ends(client: KafkaClient, partitions: list[TopicPartition], isolation_level: int = 0) -> int:
    return sum(client.list_offsets(partitions, "latest", isolation_level=isolation_level).values())


def _wait_first(client: KafkaClient, partitions: list[TopicPartition], process: subprocess.Popen, work: Path) -> float:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while _ends(client, partitions) == 0:
        _check_alive(process, work)
        if time.monotonic() > deadline:
            raise MirrorMakerError(f"MirrorMaker 2 copied nothing within {_START_TIMEOUT_S:.0f} s; its log: "
                                   f"{_tail(work / 'mm2.log')}")
        time.sleep(_POLL_S)
    return time.perf_counter()


def _wait_last(client: KafkaClient, partitions: list[TopicPartition], records: int, exactly_once: bool,
               process: subprocess.Popen, work: Path) -> float:
    """When the last record arrived: at-least-once, the high watermark reaches the record count
    (MM2 writes nothing else there); exactly-once, the end (records and markers) stops moving
    and is stable, that is every transaction is committed. The time is the last move's."""
    last, moved = -1, time.perf_counter()
    while True:
        _check_alive(process, work)
        end = _ends(client, partitions)
        now = time.perf_counter()
        if end != last:
            last, moved = end, now
        if not exactly_once and end >= records:
            return now
        if exactly_once and end >= records and now - moved >= _SETTLE_S:
            if _ends(client, partitions, READ_COMMITTED) == end:
                return moved
        if now - moved > _STALL_S:
            raise MirrorMakerError(f"MirrorMaker 2 stalled at {end} of {records} records; its log: "
                                   f"{_tail(work / 'mm2.log')}")
        time.sleep(_POLL_S)


def _check_alive(process: subprocess.Popen, work: Path) -> None:
    if process.poll() is not None:
        raise MirrorMakerError(f"MirrorMaker 2 exited with {process.returncode}: {_tail(work / 'mm2.out')} "
                               f"{_tail(work / 'mm2.log')}")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(none)"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
"""
