"""A test hook that makes an in-process embedded broker answer NOT_LEADER_OR_FOLLOWER for a
while, as a broker does once leadership of its partitions has moved and before a client
re-reads metadata. The broker package stays as it is: its handler modules are patched in the
test process (both brokers of a test share them, so the hook picks its broker by state)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import kafka.errors as kerr

from mirror.broker.handlers import fetch as fetch_handler
from mirror.broker.handlers import metadata as metadata_handler
from mirror.broker.handlers import produce as produce_handler
from mirror.protocol import ProducedPartition

NOT_LEADER = kerr.NotLeaderForPartitionError.errno  # NOT_LEADER_OR_FOLLOWER since Kafka 2.6


@dataclass
class NotLeaderForAWhile:
    """Answer requests ``first`` to ``first + count - 1`` of ``api`` ("produce" or "fetch"),
    counted from installation, with NOT_LEADER_OR_FOLLOWER for every partition of ``topic``;
    count the Metadata requests, and those after the first refusal (the clients' refreshes)."""

    broker: object
    api: str
    topic: str
    first: int = 3
    count: int = 6
    requests: int = 0
    refused: int = 0
    metadata_requests: int = 0
    metadata_after_refusal: int = 0
    _written: set = field(default_factory=set)

    def install(self, monkeypatch) -> "NotLeaderForAWhile":
        module = {"produce": produce_handler, "fetch": fetch_handler}[self.api]
        original, original_metadata = module.handle, metadata_handler.handle
        wrap = self._produce if self.api == "produce" else self._fetch

        async def handle(request, version, state):
            if state is not self.broker.state:
                return await original(request, version, state)
            return await wrap(original, request, version, state)

        async def metadata(request, version, state):
            if state is self.broker.state:
                self.metadata_requests += 1
                self.metadata_after_refusal += self.refused > 0
            return await original_metadata(request, version, state)

        monkeypatch.setattr(module, "handle", handle)
        monkeypatch.setattr(metadata_handler, "handle", metadata)
        return self

    def _in_window(self) -> bool:
        self.requests += 1
        return self.first <= self.requests < self.first + self.count

    async def _produce(self, original, request, version, state):
        """Only partitions written before are refused: leadership moves after the producer
        began there, so the new leader knows its sequences (a broker accepts any first
        sequence from a producer it has no state for, as Kafka's does)."""
        ours = [part for part in request.partitions if (part.topic, part.partition) in self._written]
        self._written.update((part.topic, part.partition) for part in request.partitions if part.topic == self.topic)
        if not ours or not self._in_window():
            return await original(request, version, state)
        self.refused += 1
        request.partitions[:] = [part for part in request.partitions if part not in ours]
        response = await original(request, version, state)
        response.partitions.extend(ProducedPartition(p.topic, p.partition, NOT_LEADER, error_message="moved")
                                   for p in ours)
        return response

    async def _fetch(self, original, request, version, state):
        response = await original(request, version, state)
        if not any(p.topic == self.topic for p in response.partitions) or not self._in_window():
            return response
        self.refused += 1
        return dataclasses.replace(response, partitions=[
            dataclasses.replace(p, error_code=NOT_LEADER, records=memoryview(b"")) if p.topic == self.topic else p
            for p in response.partitions])
