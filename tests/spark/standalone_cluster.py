"""A Spark standalone cluster (one master, one worker) on 127.0.0.1, started from PySpark's own
jars for a test, the way an operator starts one with ``spark-class``.

Both daemons run in process groups of their own, so stopping a group also ends the executor
JVM the worker forked and its Python workers. Every port is a free one and every file (logs,
the worker's application directories) goes under the test's directory. A cluster that fails
to come up, or a test that fails while it runs, prints the daemons' logs and the executors'
stderr, which is where a cluster's problems show.

Imported as ``standalone_cluster`` (pytest puts each test file's directory on ``sys.path``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 20


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def loopback_env() -> dict[str, str]:
    """The environment for Spark processes here: bound to loopback, and with no
    ``PYSPARK_PYTHON``, so the executors' Python is whatever the driver tells them to use."""
    env = {key: value for key, value in os.environ.items() if key != "PYSPARK_PYTHON"}
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1")
    return env


@dataclass
class StandaloneCluster:
    """A master and one worker of ``cores`` cores and ``memory`` (a Spark size, e.g. ``1g``)."""

    root: Path
    cores: int = 2
    memory: str = "1g"
    port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    killed: set[str] = field(default_factory=set)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def work_dir(self) -> Path:
        return self.root / "work"

    def start(self) -> None:
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui_port))
        self.add_worker("worker")

    def add_worker(self, name: str) -> None:
        """Start a worker, ``name``, and wait until the master lists it alive. It is told apart
        by its web UI port, not by a count: a worker killed a moment ago still counts alive
        until the master notices, a minute later, and may stop counting meanwhile."""
        ui_port = free_port()
        self._spawn(name, "org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
                    "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(ui_port),
                    "--work-dir", str(self.work_dir))
        self._wait_for_worker(ui_port)

    def kill_worker(self, name: str) -> None:
        """SIGKILL a worker's whole process group: its JVM, its executors and their Python
        workers, as a machine that dies takes them."""
        _signal_group(self.processes[name], signal.SIGKILL)
        self.processes[name].wait()
        self.killed.add(name)

    def state(self) -> dict:
        """The master's own view of the cluster: the JSON its web UI serves at ``/json/``."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as answer:
            return json.load(answer)

    def finished_apps(self) -> list[dict]:
        """The applications the master saw end, once none is running (the master learns of an
        application's end from its driver, a moment after the driver exits)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while (state := self.state())["activeapps"]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"applications still running on {self.master_url}: {state['activeapps']}")
            time.sleep(0.2)
        return state["completedapps"]

    def executor_logs(self) -> list[Path]:
        """Each executor's stderr, under the worker's application directories."""
        return sorted(self.work_dir.glob("app-*/*/stderr"))

    def stop(self) -> None:
        """SIGTERM to each process group, SIGKILL to any still there after ``STOP_TIMEOUT_S``."""
        for process in self.processes.values():
            _signal_group(process, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait()
            _signal_group(process, signal.SIGKILL)  # whatever the daemon forked and left behind

    def logs(self) -> str:
        """The master's and worker's logs and every executor's stderr, for a failure report."""
        files = [self.root / f"{name}.log" for name in self.processes]
        files += self.executor_logs()
        return "\n".join(f"===== {path} =====\n{path.read_text(errors='replace')}" for path in files if path.exists())

    def _spawn(self, name: str, main_class: str, *args: str) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{name}.log", "wb") as log:
            self.processes[name] = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), main_class, *args], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=loopback_env(), cwd=self.root, start_new_session=True)

    def _wait_for_worker(self, ui_port: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            for name, process in self.processes.items():
                if name not in self.killed and process.poll() is not None:
                    raise RuntimeError(f"the Spark {name} exited with code {process.returncode} while starting")
            try:
                if any(worker.get("state") == "ALIVE" and worker.get("webuiaddress", "").endswith(f":{ui_port}")
                       for worker in self.state().get("workers", [])):
                    return
            except (OSError, urllib.error.URLError, ValueError):
                pass  # the master's web UI is not up yet
            if time.monotonic() > deadline:
                raise TimeoutError(f"the worker with web UI port {ui_port} did not register with {self.master_url} "
                                   f"in {START_TIMEOUT_S} s")
            time.sleep(0.2)


def _signal_group(process: subprocess.Popen, sig: signal.Signals) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


@contextmanager
def standalone_cluster(root: Path, **options) -> Iterator[StandaloneCluster]:
    """A running :class:`StandaloneCluster`, always stopped on the way out; its logs are printed
    (pytest shows them with the failure) if it fails to start or the body raises."""
    cluster = StandaloneCluster(root, **options)
    try:
        cluster.start()
        yield cluster
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()
