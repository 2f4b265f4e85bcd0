"""KRaft clusters of real Apache Kafka on loopback ports, started from the jars of
:mod:`.distribution` the way Kafka's own scripts do: ``kafka.tools.StorageTool format``, then
``kafka.Kafka server.properties``, one JVM per node.

Every node is a combined broker and controller (``process.roles=broker,controller``), so one
node is a whole cluster, and three nodes are three brokers over a three-voter quorum that
survives the loss of any one. A cluster of three is set up as production clusters are:
replication factor 3 and ``min.insync.replicas=2`` for topics and for Kafka's internal topics.

Listeners, all on 127.0.0.1:

- ``PLAINTEXT``, always;
- ``SSL`` with client certificates required (mTLS), given :class:`TlsFiles`;
- ``SASL_SSL`` with SCRAM-SHA-512, given TLS files and ``scram_users``; the credentials are
  created the Kafka way, by ``format --add-scram``;
- ``INTERNAL`` (between brokers) and ``CONTROLLER`` (the quorum), plaintext.

ACLs are enforced only when asked for (``authorizer=True``): KRaft's ``StandardAuthorizer``
(KIP-801), with ``User:ANONYMOUS`` a super user. Every plaintext connection is ANONYMOUS, so
the tests, kmirror, the brokers among themselves and the quorum (the controllers enforce
ACLs too, on their own plaintext listener) keep every right, while ACLs created there are
held, described and enforced as on a secured production cluster. A resource
without ACLs stays open to everyone (``allow.everyone.if.no.acl.found``); one with ACLs binds
the principals of the SSL and SASL_SSL listeners, who are not super users.

A node can be killed (SIGKILL) and started again on the same ports and data; the cluster
stops with SIGTERM (a controlled shutdown), then SIGKILL for what is still running.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .distribution import KAFKA_4, KAFKA_VERSIONS, Distribution, ToolchainError, java_command

__all__ = ["KafkaCluster", "KafkaNode", "TlsFiles", "ClusterStartError", "LISTENERS", "STANDARD_AUTHORIZER",
           "LOG4J2_TEMPLATE"]

log = logging.getLogger(__name__)

LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
"""The client listeners a cluster may offer, named as Kafka's ``security.protocol`` names them."""
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
READY = "Kafka Server started"
"""What ``KafkaRaftServer`` logs once the node serves clients."""
SCRAM = "SCRAM-SHA-512"


class ClusterStartError(ToolchainError):
    """A node did not start; the message carries the end of its log."""


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for the SSL and SASL_SSL listeners (Kafka reads PEM since KIP-651).

    ``server`` holds the broker's PKCS#8 private key and its certificate chain; ``ca`` the CA
    that signed it, which the brokers also trust for client certificates."""

    ca: Path
    server: Path


@dataclass
class KafkaNode:
    """One broker+controller JVM."""

    node_id: int
    directory: Path
    ports: dict[str, int]
    process: subprocess.Popen | None = None
    ready_from: int = 0
    """Where in the log to look for the ready line: a restarted node must log a new one."""

    @property
    def config_file(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_file(self) -> Path:
        return self.directory / "logs" / "server.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def address(self, listener: str = "PLAINTEXT") -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def kill(self) -> None:
        """SIGKILL, as a lost machine: no controlled shutdown, nothing flushed."""
        if self.running:
            self.process.kill()
            self.process.wait()

    def log_tail(self, lines: int = 30) -> str:
        for path in (self.log_file, self.directory / "logs" / "stdout.log"):
            if path.exists() and path.stat().st_size:
                return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        return "(the node wrote no log)"


@dataclass
class KafkaCluster:
    """A KRaft cluster of ``nodes`` combined nodes of ``distribution``, in ``directory``.

    ``broker_configs`` are added to every node's ``server.properties`` (and win over the
    defaults here); ``heap_mb`` is each JVM's fixed heap (``-Xms`` = ``-Xmx``); ``authorizer``
    enforces ACLs (see the module's docstring).
    """

    directory: Path
    nodes: int = 1
    distribution: Distribution = KAFKA_4
    heap_mb: int = 512
    tls: TlsFiles | None = None
    scram_users: dict[str, str] = field(default_factory=dict)
    broker_configs: dict[str, str] = field(default_factory=dict)
    authorizer: bool = False
    advertised: dict[str, str] = field(default_factory=dict)
    """Listener name to the ``host:port`` clients are told to use instead of the node's own, as
    where a proxy stands in front of it (``kmirror bench mirror --source-rtt-ms``); one-node
    clusters only."""
    members: list[KafkaNode] = field(default_factory=list, init=False)
    cluster_id: str = field(default_factory=lambda: _kafka_uuid(), init=False)
    _archiving: Path | None = field(default=None, init=False, repr=False)
    """Where this cluster's first broker dumps its classes when it stops (:meth:`_class_sharing`)."""

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)
        if self.nodes not in (1, 3):
            raise ValueError(f"a cluster has 1 or 3 nodes, not {self.nodes}")
        if self.advertised and self.nodes != 1:
            raise ValueError("advertised addresses are for one-node clusters: each node would need its own")
        if self.scram_users and self.tls is None:
            raise ValueError("SCRAM users need TLS files: they log in on the SASL_SSL listener")

    # --- addresses ------------------------------------------------------------------------------------

    @property
    def listeners(self) -> tuple[str, ...]:
        return ("PLAINTEXT",) + (("SSL", "SASL_SSL") if self.tls is not None else ())

    @property
    def bootstrap(self) -> str:
        return self.bootstrap_for("PLAINTEXT")

    def bootstrap_for(self, listener: str) -> str:
        return ",".join(node.address(listener) for node in self.members)

    def node(self, node_id: int) -> KafkaNode:
        return next(node for node in self.members if node.node_id == node_id)

    # --- lifecycle ------------------------------------------------------------------------------------

    def start(self, timeout_s: float = 120) -> "KafkaCluster":
        java = java_command()
        if java is None:
            raise ToolchainError("cannot start Kafka: no Java ($JAVA_HOME/bin/java or java on the PATH)")
        self._libs = self.distribution.resolve()
        self._java = java
        self.directory.mkdir(parents=True, exist_ok=True)
        used: set[int] = set()
        self.members = [KafkaNode(i, self.directory / f"node-{i}",
                                  {name: _free_port(used) for name in ("CONTROLLER", "INTERNAL", *self.listeners)})
                        for i in range(1, self.nodes + 1)]
        for node in self.members:
            self._write_config(node)
            self._format(node)
        for node in self.members:
            self._launch(node)
        self._wait_ready(self.members, timeout_s)
        self._save_state()
        return self

    def start_node(self, node_id: int, timeout_s: float = 120) -> KafkaNode:
        """Start a node that was killed or stopped, on its old ports and data."""
        node = self.node(node_id)
        if node.running:
            raise RuntimeError(f"node {node_id} is running")
        self._launch(node)
        self._wait_ready([node], timeout_s)
        self._save_state()
        return node

    def kill(self, node_id: int) -> None:
        self.node(node_id).kill()

    def stop(self, timeout_s: float = 30) -> None:
        """SIGTERM every node (each shuts down in a controlled way), then SIGKILL what is left."""
        for node in self.members:
            if node.running:
                node.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for node in self.members:
            if node.process is None:
                continue
            try:
                node.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("Kafka node %d did not stop in %.0f s; killing it", node.node_id, timeout_s)
                node.kill()
        if self._archiving is not None and self._archiving.exists():
            os.replace(self._archiving, self._class_archive)  # whole, or not at all: a broker killed dumps nothing
            self._archiving = None

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- one node's set-up ----------------------------------------------------------------------------

    def _write_config(self, node: KafkaNode) -> None:
        (node.directory / "logs").mkdir(parents=True, exist_ok=True)
        replicas = str(self.nodes)
        min_isr = "2" if self.nodes == 3 else "1"
        protocols = {"CONTROLLER": "PLAINTEXT", "INTERNAL": "PLAINTEXT", "PLAINTEXT": "PLAINTEXT", "SSL": "SSL",
                     "SASL_SSL": "SASL_SSL"}
        names = ["CONTROLLER", "INTERNAL", *self.listeners]
        config = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": ",".join(f"{n.node_id}@127.0.0.1:{n.ports['CONTROLLER']}" for n in self.members),
            "listeners": ",".join(f"{name}://127.0.0.1:{node.ports[name]}" for name in names),
            "advertised.listeners": ",".join(f"{name}://{self.advertised.get(name, f'127.0.0.1:{node.ports[name]}')}"
                                             for name in names[1:]),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "INTERNAL",
            "listener.security.protocol.map": ",".join(f"{name}:{protocols[name]}" for name in names),
            "log.dirs": str(node.directory / "data"),
            "default.replication.factor": replicas,
            "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            # Tests start groups at once; production clusters keep Kafka's 3 s.
            "group.initial.rebalance.delay.ms": "0",
        }
        if self.tls is not None:
            config.update({
                "ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.tls.server),
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.tls.ca),
                "listener.name.ssl.ssl.client.auth": "required",
                "listener.name.sasl_ssl.ssl.client.auth": "none",
                "listener.name.sasl_ssl.sasl.enabled.mechanisms": SCRAM,
                f"listener.name.sasl_ssl.{SCRAM.lower()}.sasl.jaas.config":
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            })
        if self.authorizer:
            config.update({"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS",
                           "allow.everyone.if.no.acl.found": "true"})
        config.update(self.broker_configs)
        node.config_file.write_text("".join(f"{key}={value}\n" for key, value in config.items()))
        logging_config = node.directory / ("log4j2.properties" if self._log4j2 else "log4j.properties")
        logging_config.write_text((LOG4J2_TEMPLATE if self._log4j2 else _LOG4J1).format(file=node.log_file))

    @property
    def _log4j2(self) -> bool:
        return int(self.distribution.version.split(".")[0]) >= 4

    def _format(self, node: KafkaNode) -> None:
        command = [*self._java_command(node, "kafka.tools.StorageTool"), "format", "--cluster-id", self.cluster_id,
                   "--config", str(node.config_file)]
        for user, password in self.scram_users.items():
            command += ["--add-scram", f"{SCRAM}=[name={user},password={password}]"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise ClusterStartError(f"kafka-storage format failed for node {node.node_id}: "
                                    f"{(done.stdout + done.stderr).strip()[-2000:]}")

    def _java_command(self, node: KafkaNode, main: str) -> list[str]:
        logging_config = node.directory / ("log4j2.properties" if self._log4j2 else "log4j.properties")
        logging_flag = (f"-Dlog4j2.configurationFile={logging_config}" if self._log4j2
                        else f"-Dlog4j.configuration=file:{logging_config}")
        return [self._java, f"-Xms{self.heap_mb}m", f"-Xmx{self.heap_mb}m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true", logging_flag,
                *self._class_sharing(main), "-cp", f"{self._libs}/*", main]

    @property
    def _class_archive(self) -> Path:
        return self._libs.parent / "classes.jsa"

    def _class_sharing(self, main: str) -> list[str]:
        """Class-data sharing (AppCDS): the classes a broker loads, mapped from an archive
        beside the distribution's jars instead of loaded from them, which took a node's start
        from 3.6 to 2.3 CPU seconds on two cores (the storage tool's and the broker's JVMs;
        docs/testing.md). The first broker of a distribution that stops cleanly writes the
        archive (``-XX:ArchiveClassesAtExit``); every JVM after it maps it. ``-Xshare:auto``:
        an archive that does not fit (another Java) is left aside, and the JVM loads its
        classes itself, as without one."""
        archive = self._class_archive
        if archive.exists():
            return [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
        if main == "kafka.Kafka" and self._archiving is None:
            self._archiving = archive.with_name(f"classes.jsa.{os.getpid()}.{self.cluster_id}")
            return [f"-XX:ArchiveClassesAtExit={self._archiving}"]
        return []

    def _launch(self, node: KafkaNode) -> None:
        node.log_file.parent.mkdir(parents=True, exist_ok=True)
        node.ready_from = node.log_file.stat().st_size if node.log_file.exists() else 0
        with open(node.directory / "logs" / "stdout.log", "ab") as out:
            # A session of its own: a Ctrl-C meant for the caller does not reach the brokers.
            node.process = subprocess.Popen([*self._java_command(node, "kafka.Kafka"), str(node.config_file)],
                                            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)

    def _wait_ready(self, nodes: list[KafkaNode], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        waiting = list(nodes)
        while waiting:
            for node in list(waiting):
                if node.process.poll() is not None:
                    self.stop()
                    raise ClusterStartError(f"Kafka node {node.node_id} exited with {node.process.returncode}:\n"
                                            f"{node.log_tail()}")
                if node.log_file.exists():
                    with open(node.log_file, "rb") as f:
                        f.seek(node.ready_from)
                        if READY.encode() in f.read():
                            waiting.remove(node)
            if waiting and time.monotonic() > deadline:
                self.stop()
                raise ClusterStartError(f"Kafka node {waiting[0].node_id} not ready in {timeout_s:.0f} s:\n"
                                        f"{waiting[0].log_tail()}")
            time.sleep(0.1)

    def _save_state(self) -> None:
        """``cluster.json``: what ``python -m mirror.realkafka`` needs to report and stop the cluster
        from another process."""
        state = {"version": self.distribution.version, "bootstrap": {name: self.bootstrap_for(name) for name in self.listeners},
                 "nodes": [{"id": n.node_id, "pid": n.process.pid if n.process else None, "ports": n.ports}
                           for n in self.members]}
        (self.directory / "cluster.json").write_text(json.dumps(state, indent=2) + "\n")


def _kafka_uuid() -> str:
    """A cluster id as ``kafka-storage random-uuid`` prints it: 16 random bytes, URL-safe base64,
    drawn again when it starts with "-" (as Kafka's ``Uuid.randomUuid`` does), which the
    command line would take for an option (one draw in 64)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _free_port(used: set[int]) -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in used:
            used.add(port)
            return port


LOG4J2_TEMPLATE = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
"""
_LOG4J1 = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={file}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def distribution_for(version: str) -> Distribution:
    try:
        return KAFKA_VERSIONS[version]
    except KeyError:
        raise ValueError(f"Kafka {version} is not pinned here; known: {', '.join(KAFKA_VERSIONS)}") from None
