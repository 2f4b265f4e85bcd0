"""The copier's socket carries kmirror's three messages as data and nothing else: every field
of the job's configuration crosses it and comes back equal (issue 60: a CA file's path did not),
secrets arrive and are never quoted in an error, and copiers are placed so that one partition
is never followed by two of them."""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import os
import pickle
import socket
import struct
import types
import typing
from pathlib import Path

import annotated_types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, SecretStr

from mirror.config import ClusterConfig, RetryConfig, load_config
from mirror.engine import CopyJob, CopyRequest
from mirror.engine.copier import assignments, copier_index
from mirror.engine.copier.messages import Lease, MessageError, Release, Report, decode, encode, receive, send
from mirror.engine.offset_syncs import SyncEntry, SyncLog
from mirror.kafka import TopicPartition
from mirror.routing import RoutingPolicy

PASSWORD = "pw-3d9a61-never-quoted"


@pytest.fixture
def pair():
    ours, theirs = socket.socketpair()
    yield ours, theirs
    ours.close()
    theirs.close()


def _tls_job(tmp_path: Path) -> CopyJob:
    """A job whose destination has every TLS and SASL field set, files included."""
    for name in ("ca.pem", "cert.pem", "key.pem"):
        (tmp_path / name).write_text("-----BEGIN CERTIFICATE-----\n")
    config = load_config(None, {
        "source.bootstrap": "a:1", "destination.bootstrap": "b:2", "topics": "t",
        "destination.security_protocol": "SASL_SSL", "destination.tls.ca_file": str(tmp_path / "ca.pem"),
        "destination.tls.cert_file": str(tmp_path / "cert.pem"), "destination.tls.key_file": str(tmp_path / "key.pem"),
        "destination.tls.key_password": "key-pw", "destination.sasl.mechanism": "SCRAM-SHA-512",
        "destination.sasl.username": "u", "destination.sasl.password": PASSWORD})
    return CopyJob.from_config(config, {}, run_id="r", lease_s=30)


def test_a_lease_with_tls_files_and_secrets_arrives_whole(pair, tmp_path):
    """The regression of issue 60: a TLS cluster's lease (its CA file a path) was refused."""
    ours, theirs = pair
    lease = Lease(_tls_job(tmp_path), 3, (CopyRequest(TopicPartition("t", 0), 5, 10),), 30.0)
    send(ours, lease)
    got = receive(theirs, Lease, Release)
    assert got == lease
    assert got.job.destination.tls.ca_file == tmp_path / "ca.pem"
    assert got.job.destination.sasl.password.get_secret_value() == PASSWORD
    assert got.job.destination.tls.key_password.get_secret_value() == "key-pw"


def test_the_wrong_message_is_a_typed_error_naming_both_kinds(pair):
    ours, theirs = pair
    send(ours, Release())
    with pytest.raises(MessageError, match="expected Report, got Release") as caught:
        receive(theirs, Report)
    assert caught.value.kind == "Release"


def test_a_pickle_is_refused_and_nothing_in_it_runs(pair, tmp_path):
    """The old wire format, or anything else that is not JSON, is refused without being run."""
    ours, theirs = pair
    marker = tmp_path / "ran"

    class Runs:
        def __reduce__(self):
            return (os.mkdir, (str(marker),))

    data = pickle.dumps(Runs())
    ours.sendall(struct.pack(">IB", len(data), 0) + data)
    with pytest.raises(MessageError, match="a Lease that does not validate"):
        receive(theirs, Lease, Release)
    assert not marker.exists()


def test_a_body_that_does_not_validate_names_the_fields_and_quotes_no_value(tmp_path):
    frame = encode(Lease(_tls_job(tmp_path), 3, (), 30.0))
    body = frame[5:].replace(b'"mechanism":"SCRAM-SHA-512"', b'"mechanism":"SCRAM-MD5"')
    (tmp_path / "ca.pem").unlink()  # there when the driver loaded it, not where the copier runs
    with pytest.raises(MessageError) as caught:
        decode(frame[4], body, Lease)
    text = str(caught.value)
    assert "job.destination.tls.ca_file" in text and "job.destination.sasl.mechanism" in text
    assert PASSWORD not in text and "SCRAM-MD5" not in text and str(tmp_path) not in text


def test_an_unknown_kind_and_a_huge_size_are_refused_without_reading_on(pair):
    ours, theirs = pair
    ours.sendall(struct.pack(">IB", 2, 9) + b"{}")
    with pytest.raises(MessageError, match="unknown kind 9"):
        receive(theirs, Lease)
    ours.sendall(struct.pack(">IB", 2**31, 0))
    with pytest.raises(MessageError, match="not a kmirror copier's"):
        receive(theirs, Lease)


# Every config field crosses the boundary (issue 60, part 4): strategies built from the types
# themselves, every optional field set, so a field added to the configuration or to the job
# is sent by the next run of this test. A field of a type not known below fails the test: teach
# it the type, then the codec.

_FILES: list[Path] = []
"""Files that exist, for FilePath fields (the copier validates that they do)."""

_OVERRIDES: dict[tuple[type, str], st.SearchStrategy] = {
    # One protocol lets both tables be set; the *_env fields are read and cleared when loaded.
    (ClusterConfig, "security_protocol"): st.just("SASL_SSL"),
    (ClusterConfig, "bootstrap"): st.lists(st.builds("{}:{}".format, st.from_regex(r"[a-z0-9.-]{1,20}", fullmatch=True),
                                                     st.integers(1, 65535)), min_size=1, max_size=3).map(tuple),
    (RetryConfig, "max_backoff_s"): st.floats(0.001, 1e6),
    (RoutingPolicy, "destination_partitions"): st.integers(1, 100_000),
    (RoutingPolicy, "max_decompressed_size"): st.integers(0, 2**40),
    (RoutingPolicy, "coalesce_below_bytes"): st.integers(0, 2**20),
    (RoutingPolicy, "coalesce_target_bytes"): st.integers(2**20, 2**30),
}


def _bounds(metadata) -> dict:
    bounds = {}
    for m in metadata:
        if isinstance(m, annotated_types.Gt):
            bounds["gt"] = m.gt
        elif isinstance(m, annotated_types.Ge):
            bounds["ge"] = m.ge
        elif isinstance(m, annotated_types.Le):
            bounds["le"] = m.le
        elif isinstance(m, annotated_types.Lt):
            bounds["lt"] = m.lt
        elif isinstance(m, annotated_types.MinLen):
            bounds["min_len"] = m.min_length
    return bounds


def _scalar(kind: type, bounds: dict) -> st.SearchStrategy:
    if kind is bool:
        return st.booleans()
    if kind is int:
        low = bounds.get("ge", bounds.get("gt", -2**62 - 1) + 1)
        high = bounds.get("le", bounds.get("lt", 2**62 + 1) - 1)
        return st.integers(low, high)
    if kind is float:
        return st.floats(bounds.get("ge", bounds.get("gt", -1e12)), bounds.get("le", 1e12),
                         exclude_min="gt" in bounds, allow_nan=False, allow_infinity=False)
    return st.text(min_size=bounds.get("min_len", 0), max_size=30)


def _strategy(annotation, metadata=()) -> st.SearchStrategy:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _strategy(args[0], (*metadata, *annotation.__metadata__))
    if origin in (typing.Union, types.UnionType):
        present = [a for a in args if a is not type(None)]
        return st.one_of([_strategy(a, metadata) for a in present])  # every optional field set
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin is tuple:
        element = _strategy(args[0])
        return st.lists(element, min_size=_bounds(metadata).get("min_len", 0), max_size=3).map(tuple)
    if origin is list:
        return st.lists(_strategy(args[0]), max_size=3)
    if origin in (dict, collections.abc.Mapping):
        return st.dictionaries(_strategy(args[0]), _strategy(args[1]), max_size=3)
    if annotation in (bool, int, float, str):
        return _scalar(annotation, _bounds(metadata))
    if annotation is Path:
        return st.sampled_from(_FILES)
    if annotation is SecretStr:
        return st.text(max_size=30).map(SecretStr)
    if annotation is SyncLog:  # keyed by partition pairs: built as the copy builds it
        return st.lists(_sync_entries(), max_size=4).map(SyncLog.of)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return st.sampled_from(list(annotation))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        fields = {name: _field(annotation, name, info.annotation, info.metadata)
                  for name, info in annotation.model_fields.items() if not name.endswith("_env")}
        return st.fixed_dictionaries(fields).map(lambda values: annotation(**values))
    if isinstance(annotation, type) and (dataclasses.is_dataclass(annotation) or hasattr(annotation, "_fields")):
        hints = typing.get_type_hints(annotation, include_extras=True)
        names = [f.name for f in dataclasses.fields(annotation)] if dataclasses.is_dataclass(annotation) \
            else list(annotation._fields)
        return st.builds(annotation, **{name: _field(annotation, name, hints[name]) for name in names})
    raise TypeError(f"no strategy for {annotation!r}: teach this test the new type, and check that the copier's "
                    f"messages carry it")


def _field(owner: type, name: str, annotation, metadata=()) -> st.SearchStrategy:
    override = _OVERRIDES.get((owner, name))
    return override if override is not None else _strategy(annotation, metadata)


def _sync_entries() -> st.SearchStrategy:
    def entry(source, first, length, destination, base, exact, extra):
        end = base + length if exact else base + 1 + extra
        return SyncEntry(source, first, first + length - 1, destination, base, end, exact)

    partitions = st.builds(TopicPartition, st.sampled_from(["a", "b,0", "c"]), st.integers(0, 3))
    return st.builds(entry, partitions, st.integers(0, 10**9), st.integers(1, 1000), partitions, st.integers(0, 10**9),
                     st.booleans(), st.integers(0, 50))


@pytest.fixture(scope="module", autouse=True)
def _files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pem")
    _FILES[:] = [directory / name for name in ("ca.pem", "client.pem", "key.pem")]
    for path in _FILES:
        path.write_text("pem\n")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_field_of_every_message_crosses_the_socket_and_comes_back_equal(data):
    lease, report = data.draw(_strategy(Lease)), data.draw(_strategy(Report))
    tls, sasl = lease.job.destination.tls, lease.job.destination.sasl
    assert None not in (tls.ca_file, tls.cert_file, tls.key_file, tls.key_password, sasl.password)  # all set
    assert report.stats.failure is not None and report.refused is not None
    for message in (lease, report, Release()):
        frame = encode(message)
        assert decode(frame[4], frame[5:], Lease, Release, Report) == message


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


def test_a_copier_that_cannot_read_its_lease_says_why_and_the_task_fails_for_good(tmp_path, capfd):
    """A real copier process, leased a job whose CA file is not where the copier runs: the task
    is told which message and which field (not that the copier "went away"), the copier's log
    says so too, and the failure is permanent: a new copier would refuse it again."""
    from mirror.engine.copier import release
    from mirror.engine.task import copy_task

    job = dataclasses.replace(_tls_job(tmp_path), run_id=f"refused-{os.getpid()}")
    (tmp_path / "ca.pem").unlink()
    try:
        stats = copy_task(job, 0, [CopyRequest(TopicPartition("t", 0), 0, 10)])
    finally:
        assert release(job, 0) is not None  # a Release it can read: it answers, and exits
    failure = stats.failure
    assert failure is not None and failure.permanent and failure.kind == "CopierRefusedError"
    assert "Lease" in failure.message and "job.destination.tls.ca_file" in failure.message
    assert "went away" not in failure.message and PASSWORD not in failure.message
    logged = capfd.readouterr().err
    assert "refused a message: a Lease that does not validate" in logged and "job.destination.tls.ca_file" in logged
