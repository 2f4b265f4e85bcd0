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

import re
import subprocess
import time
from pathlib import Path

from ..kafka import TopicPartition
from ..realkafka.cluster import LOG4J2_TEMPLATE
from ..realkafka.distribution import Distribution, java_command
from .arrival import MirrorProcessError, Watched, measure_mirror
from .latency_proxy import free_port
from .mode_run import ModeRun
from .stats import Sample

__all__ = ["MM2", "MAIN", "CONFIGURATION_FILE", "properties", "launch", "copy_mirrormaker"]

MM2 = Distribution("connect-mirror", "4.3.1")
"""connect-mirror 4.4.0 is not on Maven Central here; 4.3.1 talks to 4.4 brokers as any 4.x client."""
MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"
HEAP = ("-Xms256M", "-Xmx2G")
"""``connect-mirror-maker.sh``'s default ``KAFKA_HEAP_OPTS``."""
TARGET = "target"
CONFIGURATION_FILE = "mm2.properties"
"""What a run writes its configuration to, in its work directory (the bench keeps it)."""


def properties(source: str, destination: str, topic: str, tasks: int, *, exactly_once: bool, alias: str,
               rest_port: int | None = None, topics: str | None = None) -> dict[str, str]:
    """The dedicated-mode configuration of one run (see the module's docstring): ``topic`` (or
    the ``topics`` regex) from ``source`` to ``destination`` by ``tasks`` tasks."""
    flow = f"{alias}->{TARGET}"
    config = {
        "clusters": f"{alias}, {TARGET}",
        f"{alias}.bootstrap.servers": source,
        f"{TARGET}.bootstrap.servers": destination,
        f"{flow}.enabled": "true",
        f"{flow}.topics": topics or re.escape(topic),
        f"{TARGET}->{alias}.enabled": "false",
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "tasks.max": str(tasks),
        "emit.heartbeats.enabled": "false",
        "emit.checkpoints.enabled": "false",
        "sync.group.offsets.enabled": "false",
    }
    for key in ("replication.factor", "offset-syncs.topic.replication.factor", "heartbeats.topic.replication.factor",
                "checkpoints.topic.replication.factor", "offset.storage.replication.factor",
                "status.storage.replication.factor", "config.storage.replication.factor"):
        config[key] = "1"
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


def launch(work: Path, config: dict[str, str]) -> subprocess.Popen:
    """MirrorMaker 2 in dedicated mode on ``config``, written to :data:`CONFIGURATION_FILE` in
    ``work`` (kept beside the results), its log in ``work``: as ``connect-mirror-maker.sh`` runs it."""
    config_file = work / CONFIGURATION_FILE
    config_file.write_text("".join(f"{key} = {value}\n" for key, value in config.items()))
    logging_file = work / "log4j2.properties"
    logging_file.write_text(LOG4J2_TEMPLATE.format(file=work / "mm2.log"))
    libs = MM2.resolve()
    java = java_command()
    if java is None:
        raise MirrorProcessError("no Java to run MirrorMaker 2")
    with open(work / "mm2.out", "wb") as out:
        return subprocess.Popen([java, *HEAP, "-XX:+UseG1GC", "-Djava.awt.headless=true",
                                 f"-Dlog4j2.configurationFile={logging_file}", "-cp", f"{libs}/*", MAIN,
                                 str(config_file)], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def copy_mirrormaker(spec: ModeRun) -> Sample:
    """Run MirrorMaker 2 on ``spec`` until the destination holds every record; measure it."""
    exactly_once = spec.mode == "mirrormaker2-eos"
    work = Path(spec.work_dir)
    alias = "source" + re.sub(r"\W", "", work.name)  # fresh internal topics for every run
    config = properties(spec.source, spec.destination, spec.source_topic, len(spec.end_offsets),
                        exactly_once=exactly_once, alias=alias, rest_port=free_port() if exactly_once else None)
    partitions = [TopicPartition(spec.destination_topic, p) for p in range(spec.destination_partitions)]
    began_process = time.perf_counter()
    process = launch(work, config)
    return measure_mirror(Watched("MirrorMaker 2", process, [work / "mm2.out", work / "mm2.log"]), began_process,
                          spec.destination, partitions, spec.records, transactional=exactly_once, stop_timeout_s=30)
