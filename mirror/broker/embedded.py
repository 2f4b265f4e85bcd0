"""Starting and stopping the broker: in the foreground (``kmirror broker``), in a thread, or
as a subprocess, always on loopback-friendly defaults and optionally on a free port (port 0).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable, TypeVar

from .cleaner import LogCleaner
from .server import BrokerServer
from .state import BrokerConfig, BrokerState, Clock, system_clock
from .topics import TopicStore

T = TypeVar("T")

__all__ = ["EmbeddedBroker", "BrokerProcess", "run_foreground", "READY_LINE"]

log = logging.getLogger(__name__)

READY_LINE = "kmirror broker {node_id} ready on {host}:{port}"
_READY = re.compile(r"kmirror broker (\d+) ready on (\S+):(\d+)")


class _Runtime:
    """The broker's state and server on one event loop; opened and closed on that loop."""

    def __init__(self, config: BrokerConfig, clock: Clock):
        config.data_dir.mkdir(parents=True, exist_ok=True)
        topics = TopicStore(config.data_dir, flush=config.flush)
        topics.load()
        self.state = BrokerState(config=config, topics=topics, clock=clock)
        self.state.groups.load()  # first: the transactions completed on load end pending offsets there
        self.state.transactions.load()
        self.server = BrokerServer(self.state)
        self.cleaner = LogCleaner(topics, config.cleaner, clock)
        self._timers: list[asyncio.Task] = []

    async def start(self) -> int:
        port = await self.server.start()
        config = self.state.config
        # Kafka's scheduled ``transaction-abort`` task times out abandoned transactions and
        # ``transactionalId-expiration`` forgets idle transactional ids; the
        # group coordinator's timer expires sessions and ends join and sync phases;
        # ``kafka-log-retention`` deletes expired segments of idle partitions too;
        # ``PeriodicProducerExpirationCheck`` forgets idle producers.
        self._timers = [
            asyncio.create_task(_every(config.transaction_abort_interval_ms, self.state.transactions.tick, "transaction coordinator")),
            asyncio.create_task(_every(config.transaction_remove_expired_interval_ms,
                                       self.state.transactions.remove_expired, "transactional id expiration")),
            asyncio.create_task(_every(config.groups.tick_interval_ms, self.state.groups.tick, "group coordinator")),
            asyncio.create_task(_every(config.retention_check_interval_ms, self._enforce_retention, "retention")),
            asyncio.create_task(_every(config.producer_id_expiration_check_interval_ms, self._expire_producers,
                                       "producer id expiration")),
        ]
        self.cleaner.start(asyncio.get_running_loop())
        host, advertised_port = self.state.advertised
        log.info(READY_LINE.format(node_id=self.state.config.node_id, host=self.state.config.host, port=port)
                 + (f" (advertised as {host}:{advertised_port})" if (host, advertised_port) != (self.state.config.host, port) else ""))
        return port

    def _enforce_retention(self) -> None:
        self.state.topics.enforce_retention(self.state.clock())

    def _expire_producers(self) -> None:
        expired = self.state.topics.expire_producers(self.state.clock(), self.state.config.producer_id_expiration_ms)
        if expired:
            log.info("forgot %d idle producer state entries (producer.id.expiration.ms %d)", expired,
                     self.state.config.producer_id_expiration_ms)

    async def stop(self) -> None:
        for timer in self._timers:
            timer.cancel()
        await asyncio.to_thread(self.cleaner.stop)  # a clean in progress is abandoned, its partition untouched
        self.state.groups.unload()  # parked JoinGroup/SyncGroup requests answer now, not after the grace period
        await self.server.stop()
        self.state.groups.close()
        self.state.transactions.close()
        self.state.topics.close()
        log.info("kmirror broker %d stopped; logs flushed and closed", self.state.config.node_id)


async def _every(interval_ms: int, tick: Callable[[], None], task: str) -> None:
    """Run a scheduled task's ``tick`` on the broker's event loop every ``interval_ms``."""
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            tick()
        except Exception:
            log.exception("%s tick failed; retrying at the next one", task)


def run_foreground(config: BrokerConfig) -> int:
    """Serve until SIGTERM or SIGINT, then shut down cleanly and return 0."""

    async def main() -> None:
        runtime = _Runtime(config, system_clock)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await runtime.start()
        await stop.wait()
        log.info("signal received, shutting down")
        await runtime.stop()

    asyncio.run(main())
    return 0


class EmbeddedBroker:
    """A broker on its own event-loop thread inside this process (tests, demo, benchmarks)."""

    def __init__(self, data_dir: Path | str, *, port: int = 0, clock: Clock = system_clock, **options):
        self.config = BrokerConfig(data_dir=Path(data_dir), port=port, **options)
        self._clock = clock
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._runtime: _Runtime | None = None
        self.port = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.config.host}:{self.port}"

    @property
    def state(self) -> BrokerState:
        assert self._runtime is not None, "broker not started"
        return self._runtime.state

    @property
    def cleaner(self) -> LogCleaner:
        """The log cleaner; tests call its ``clean_once`` rather than wait for its thread."""
        assert self._runtime is not None, "broker not started"
        return self._runtime.cleaner

    def start(self) -> "EmbeddedBroker":
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"kmirror-broker-{self.config.node_id}", daemon=True)
        self._thread.start()
        self.port = self._call(self._open_and_start())
        return self

    async def _open_and_start(self) -> int:
        self._runtime = _Runtime(self.config, self._clock)
        return await self._runtime.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        if self._runtime is not None:
            self._call(self._runtime.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
        self._thread = None

    def call_in_loop(self, function: Callable[[], T]) -> T:
        """Run ``function`` in the broker's event-loop thread and return its result (a profiler
        must be enabled in the thread it profiles)."""

        async def call() -> T:
            return function()

        return self._call(call())

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=60)

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class BrokerProcess:
    """``kmirror broker`` as a child process, for crash tests and process-isolated clusters.

    ``kmirror`` is the command that starts it: this interpreter's ``mirror.cli`` by default, or
    another installation's ``kmirror`` script (the wheel test runs the installed one)."""

    def __init__(self, data_dir: Path | str, *, port: int = 0, extra_args: tuple[str, ...] = (),
                 kmirror: tuple[str, ...] = (sys.executable, "-m", "mirror.cli"), cwd: Path | str | None = None):
        self.data_dir = Path(data_dir)
        self.requested_port = port
        self.extra_args = extra_args
        self.kmirror = kmirror
        self.cwd = cwd
        self.process: subprocess.Popen[str] | None = None
        self.port = 0
        self.log_lines: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60) -> "BrokerProcess":
        cmd = [*self.kmirror, "broker", "--listen", f"127.0.0.1:{self.requested_port}",
               "--data-dir", str(self.data_dir), *self.extra_args]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                                        cwd=self.cwd)
        ready = threading.Event()

        def pump() -> None:
            assert self.process is not None and self.process.stderr is not None
            for line in self.process.stderr:
                self.log_lines.append(line.rstrip())
                match = _READY.search(line)
                if match and not ready.is_set():
                    self.port = int(match.group(3))
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(timeout_s):
            self.kill()
            raise RuntimeError("broker did not become ready:\n" + "\n".join(self.log_lines[-20:]))
        return self

    def terminate(self, timeout_s: float = 30) -> int:
        """SIGTERM and wait: the exit code of a clean shutdown is 0."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout_s)

    def kill(self) -> None:
        """SIGKILL: no shutdown at all, as in a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
