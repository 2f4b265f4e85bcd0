"""The copier's socket takes kmirror's three messages and nothing else, and copiers are
placed so that one partition is never followed by two of them."""

from __future__ import annotations

import os
import pickle
import socket
import struct

import pytest

from mirror.config import load_config
from mirror.engine import CopyJob, CopyRequest
from mirror.engine.copier import assignments, copier_index
from mirror.engine.copier.messages import Lease, MessageError, Release, Report, receive, send
from mirror.kafka import TopicPartition


@pytest.fixture
def pair():
    ours, theirs = socket.socketpair()
    yield ours, theirs
    ours.close()
    theirs.close()


def _job() -> CopyJob:
    config = load_config(None, {"source.bootstrap": "a:1", "destination.bootstrap": "b:2", "topics": "t",
                                "destination.sasl.mechanism": "PLAIN", "destination.sasl.username": "u",
                                "destination.sasl.password": "secret", "destination.security_protocol": "SASL_SSL"})
    return CopyJob.from_config(config, {}, run_id="r", lease_s=30)


def test_a_lease_arrives_whole_with_its_job_and_secrets(pair):
    ours, theirs = pair
    lease = Lease(_job(), 3, (CopyRequest(TopicPartition("t", 0), 5, 10),), 30.0)
    send(ours, lease)
    got = receive(theirs, Lease, Release)
    assert got == lease
    assert got.job.destination.sasl.password.get_secret_value() == "secret"


def test_the_wrong_message_is_a_typed_error(pair):
    ours, theirs = pair
    send(ours, Release())
    with pytest.raises(MessageError, match="expected Report, got Release"):
        receive(theirs, Report)


class _Runs:
    def __reduce__(self):
        return (os.getcwd, ())


@pytest.mark.parametrize("payload", [_Runs(), {"task": 1}, [1, 2]], ids=["a function", "a dict", "a list"])
def test_anything_but_a_copier_message_is_refused_before_it_runs(pair, payload):
    ours, theirs = pair
    data = pickle.dumps(payload)
    ours.sendall(struct.pack(">I", len(data)) + data)
    with pytest.raises(MessageError):
        receive(theirs, Lease, Release)


def test_a_huge_announced_size_is_refused_without_reading_it(pair):
    ours, theirs = pair
    ours.sendall(struct.pack(">I", 2**31))
    with pytest.raises(MessageError, match="not a kmirror copier's"):
        receive(theirs, Lease)


def test_every_copier_of_a_known_partition_gets_a_lease_and_each_partition_one_copier():
    partitions = {"orders": 6, "payments": 3}
    requests = [CopyRequest(TopicPartition("orders", 1), 0, 10), CopyRequest(TopicPartition("payments", 2), 4, 8)]
    chosen = assignments(partitions, requests, copiers=4)
    indices = [a.index for a in chosen]
    assert indices == sorted(set(indices))
    expected = {copier_index(TopicPartition(t, p), 4) for t, n in partitions.items() for p in range(n)}
    assert set(indices) == expected
    placed = [(a.index, r.tp) for a in chosen for r in a.requests]
    assert sorted(placed, key=str) == sorted(((copier_index(r.tp, 4), r.tp) for r in requests), key=str)
    # A topic's partitions spread over all copiers.
    assert {copier_index(TopicPartition("orders", p), 4) for p in range(6)} == {0, 1, 2, 3}
