"""A destination topic deleted under a running mirror (issue 70, item 3), on real Kafka 4.4 and
on the embedded broker.

The scenario is the issue's: the job has copied all 6,000 records of a 3-partition topic; the
destination's topic is deleted, and 4,002 more records are written at the source. Before, the
job logged ``outage: Metadata for topic events: UNKNOWN_TOPIC_OR_PARTITION`` for ever and copied
nothing. Now:

- a topic kmirror created is made again, and its source copied again from its log start, with
  one WARN line: librdkafka's read_committed reading at the destination finds every source
  record once, in order (exactly-once and at-least-once, resident copiers and copy tasks);
- ``--on-destination-lost fail`` stops the job, exit 1, with that line;
- a topic of the user's is never made again: that topic fails with one line, the job's other
  topic is copied on, and the run ends with exit 1 naming it.

No outage is said in any of them: the destination answers. The ids in the lines are
librdkafka's (DescribeTopics).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from in_process import kmirror
from librdkafka_reader import read_values
from live_source import wait_until
from topic_lifecycle import clusters, create_topic, delete_topic, produce_values, topic_id

pytestmark = [pytest.mark.slow, pytest.mark.interop, pytest.mark.timeout(600)]

PARTITIONS = 3


def _job(tmp_path) -> str:
    """The job's name: one per test (its checkpoint's directory is the test's own)."""
    return "lost-" + tmp_path.name


def _start(source: str, destination: str, topics: str, tmp_path, log_path, *options: str) -> subprocess.Popen:
    with open(log_path, "w") as log_file:
        return subprocess.Popen(
            [sys.executable, "-m", "mirror.cli", "run", "--source", source, "--destination", destination,
             "--topics", topics, "--name", _job(tmp_path), "--checkpoint", str(tmp_path / "ck"),
             "--trigger-interval", "1", "--master", "local[2]", *options],
            stdout=subprocess.DEVNULL, stderr=log_file)


def _stop(job: subprocess.Popen) -> None:
    if job.poll() is None:
        job.kill()
        job.wait(30)


def _joined(*parts: dict[int, list[bytes]]) -> dict[int, list[bytes]]:
    return {p: [value for part in parts for value in part[p]] for p in range(PARTITIONS)}


def _copied(destination: str, name: str) -> dict[int, list[bytes]] | None:
    """What the destination holds, or None while it has no such topic."""
    try:
        return read_values(destination, name, PARTITIONS)
    except Exception:  # deleted, and not made again yet: librdkafka cannot read it
        return None


def _wait_copied(job, destination: str, name: str, expected, what: str, log_path) -> None:
    try:
        wait_until(lambda: job.poll() is not None or _copied(destination, name) == expected, what, 240, poll_s=1)
    except AssertionError:
        held = _copied(destination, name)
        raise AssertionError(f"{what}: the destination holds {None if held is None else _shape(held)}, expected "
                             f"{_shape(expected)}\n{log_path.read_text()[-3000:]}") from None
    assert job.poll() is None, log_path.read_text()[-3000:]


def _shape(values: dict[int, list[bytes]]) -> dict[int, tuple[int, list[bytes]]]:
    """Each partition's count, first and last values: enough to see what a wait did not find."""
    return {p: (len(v), v[:1] + v[-1:]) for p, v in sorted(values.items())}


@dataclass
class _Copied:
    """A job that has copied all 6,000 records of its 3-partition topic ``name``."""

    source: str
    destination: str
    destination_admin: AdminClient
    name: str
    old: dict[int, list[bytes]]
    job: subprocess.Popen
    log_path: Path

    @property
    def topics(self) -> str:
        return self.name.replace(".", r"\.")


@contextlib.contextmanager
def _copied_once(kind: str, request, tmp_path, *options: str):
    """The scene each loss starts from (:class:`_Copied`); the job is killed at the end if still running."""
    name = f"events.{kind}.{time.time_ns()}"
    with clusters(kind, request, tmp_path) as (source, destination):
        admin, destination_admin = (AdminClient({"bootstrap.servers": b}) for b in (source, destination))
        create_topic(admin, name, PARTITIONS)
        old = produce_values(source, name, "old", 2_000, PARTITIONS)
        log_path = tmp_path / "run.log"
        scene = _Copied(source, destination, destination_admin, name, old,
                        _start(source, destination, name.replace(".", r"\."), tmp_path, log_path, *options), log_path)
        try:
            _wait_copied(scene.job, destination, name, old, "the first 6,000 records at the destination", log_path)
            yield scene
        finally:
            _stop(scene.job)


@pytest.mark.parametrize("kind, delivery, copiers", [
    ("kafka", "exactly-once", True),
    ("kafka", "at-least-once", False),
    ("embedded", "exactly-once", False),
    ("embedded", "at-least-once", True),
], ids=["kafka-exactly-once-copiers", "kafka-at-least-once-tasks", "embedded-exactly-once-tasks",
        "embedded-at-least-once-copiers"])
def test_a_destination_topic_kmirror_made_is_made_again_and_every_source_record_copied_into_it_once(
        kind, delivery, copiers, request, tmp_path):
    with _copied_once(kind, request, tmp_path, "--delivery", delivery,
                      *(() if copiers else ("--no-copy-between-micro-batches",))) as scene:
        name, old, job, log_path = scene.name, scene.old, scene.job, scene.log_path
        lost_id = topic_id(scene.destination_admin, name)
        delete_topic(scene.destination_admin, name)
        new = produce_values(scene.source, name, "new", 1_334, PARTITIONS)
        _wait_copied(job, scene.destination, name, _joined(old, new), "every source record in the topic made again",
                     log_path)
        time.sleep(3)  # a few triggers more: nothing is copied twice after the catch-up
        job.send_signal(signal.SIGTERM)  # stopped as an operator stops it before verifying
        assert job.wait(120) == 0, log_path.read_text()[-3000:]
        text = log_path.read_text()
        assert read_values(scene.destination, name, PARTITIONS) == _joined(old, new)
        assert topic_id(scene.destination_admin, name) != lost_id
        line = (f"destination topic {name} (topic id {lost_id}) was deleted: what the job had copied of {name} into "
                f"it is gone; kmirror makes it again as it made it, and copies {name} again from its log start")
        assert text.count(line) == 1, text[-3000:]
        assert "outage" not in text and "Traceback" not in text, text[-3000:]
        # verify compares the new topic's copies, and names the lost topic whose copies went with it.
        verified = kmirror("verify", "--source", scene.source, "--destination", scene.destination, "--topics",
                           scene.topics, "--name", _job(tmp_path), "--master", "local[2]", "--json")
        assert verified.returncode == 0, verified
        (report,) = json.loads(verified.stdout)
        assert (report["findings"], report["earlier_ids"]) == ([], [])
        # A copy task writes its syncs with each commit; a resident copier a second after the
        # records they place, so one whose topic was deleted within that second never wrote
        # those of the lost topic (none to name then: Kafka's faster copy showed it).
        assert report["lost_ids"] == [str(lost_id)] or copiers and report["lost_ids"] == []
        assert report["destination_total"] == 3 * (2_000 + 1_334)
        # Stopped cleanly, the job synced and committed all it copied: all of the new topic is compared.
        assert report["source_records"] == report["destination_records"] == 3 * (2_000 + 1_334)


@pytest.mark.parametrize("kind", ["kafka", "embedded"])
def test_resident_copiers_of_the_lost_topics_quiet_partitions_do_not_go_on_into_the_new_one(kind, request, tmp_path):
    """Only partition 0 gets records after the loss, so only its copier meets it; partitions 1
    and 2 get theirs once the topic was made again. Their copiers, which had nothing to produce
    meanwhile, must not go on from their old positions into the new topic (Produce names a
    topic by name): the job stops the copiers before it makes the topic again."""
    with _copied_once(kind, request, tmp_path) as scene:
        name, old, job, log_path = scene.name, scene.old, scene.job, scene.log_path
        delete_topic(scene.destination_admin, name)
        first = produce_values(scene.source, name, "first", 1_334, 1)  # partition 0 only
        wait_until(lambda: job.poll() is not None or "copies " + name + " again" in log_path.read_text(),
                   "the loss said", 240, poll_s=0.2)
        time.sleep(2)
        then = produce_values(scene.source, name, "then", 1_334, PARTITIONS)
        expected = {p: old[p] + first.get(p, []) + then[p] for p in range(PARTITIONS)}
        _wait_copied(job, scene.destination, name, expected, "every source record in the topic made again", log_path)
        time.sleep(3)
        assert read_values(scene.destination, name, PARTITIONS) == expected
        text = log_path.read_text()
        assert "outage" not in text and "Traceback" not in text, text[-3000:]


@pytest.mark.parametrize("kind", ["kafka", "embedded"])
def test_on_destination_lost_fail_stops_the_job_with_the_line_and_makes_nothing_again(kind, request, tmp_path):
    with _copied_once(kind, request, tmp_path, "--on-destination-lost", "fail") as scene:
        name, log_path = scene.name, scene.log_path
        lost_id = topic_id(scene.destination_admin, name)
        delete_topic(scene.destination_admin, name)
        produce_values(scene.source, name, "new", 1_334, PARTITIONS)
        assert scene.job.wait(180) == 1, log_path.read_text()[-3000:]
        text = log_path.read_text()
        assert (f"destination topic {name} (topic id {lost_id}) was deleted: what the job had copied of {name} into "
                f"it is gone; --on-destination-lost fail stopped the job rather than make it again") in text, text[-3000:]
        assert "outage" not in text and "Traceback" not in text, text[-3000:]
        assert name not in scene.destination_admin.list_topics(timeout=30).topics


@pytest.mark.parametrize("kind, delivery", [("kafka", "exactly-once"), ("kafka", "at-least-once"),
                                            ("embedded", "exactly-once"), ("embedded", "at-least-once")])
def test_a_deleted_destination_topic_of_the_users_is_not_made_again_and_the_other_topics_go_on(
        kind, delivery, request, tmp_path):
    suffix = time.time_ns()  # this test's topics only: the Kafka pair is the module's
    name, other = f"theirs.{kind}.{suffix}", f"ours.{kind}.{suffix}"
    with clusters(kind, request, tmp_path) as (source, destination):
        admin, destination_admin = (AdminClient({"bootstrap.servers": b}) for b in (source, destination))
        create_topic(admin, name, PARTITIONS)
        create_topic(admin, other, PARTITIONS)
        create_topic(destination_admin, name, PARTITIONS)  # the user's: kmirror finds it there
        old, first = (produce_values(source, topic, "old", 500, PARTITIONS) for topic in (name, other))
        log_path = tmp_path / "run.log"
        job = _start(source, destination, rf"(theirs|ours)\.{kind}\.{suffix}", tmp_path, log_path, "--delivery", delivery)
        try:
            _wait_copied(job, destination, name, old, "the user's topic copied", log_path)
            _wait_copied(job, destination, other, first, "kmirror's topic copied", log_path)
            lost_id = topic_id(destination_admin, name)
            delete_topic(destination_admin, name)
            produce_values(source, name, "new", 500, PARTITIONS)
            then = produce_values(source, other, "then", 500, PARTITIONS)
            _wait_copied(job, destination, other, _joined(first, then), "the other topic's new records", log_path)
            time.sleep(5)  # a few triggers more: the line is said once, and the topic stays deleted
            assert job.poll() is None, log_path.read_text()[-3000:]
            job.send_signal(signal.SIGTERM)
            assert job.wait(120) == 1, log_path.read_text()[-3000:]
        finally:
            _stop(job)
        text = log_path.read_text()
        line = (f"destination topic {name} (topic id {lost_id}) was deleted, and kmirror did not create it, so it does "
                f"not make it again: {name} is not copied any more")
        assert text.count(line) == 1, text[-3000:]
        assert f"1 topic not copied: destination topic kmirror did not create deleted under the job: {name} -> {name}" \
               in text, text[-3000:]
        assert "outage" not in text and "Traceback" not in text, text[-3000:]
        assert name not in destination_admin.list_topics(timeout=30).topics
        shown = kmirror("status", "--source", source, "--destination", destination, "--topics",
                        rf"(theirs|ours)\.{kind}\.{suffix}", "--name", _job(tmp_path), "--json")
        assert shown.returncode == 0, shown
        lost = {topic["topic"]: topic["destination_lost"] for topic in json.loads(shown.stdout)["topics"]}
        assert lost == {name: True, other: False}


@pytest.mark.parametrize("kind, killed", [("kafka", "made again"), ("embedded", "said"), ("embedded", "made again")],
                         ids=["kafka-once-made-again", "embedded-once-said", "embedded-once-made-again"])
def test_a_job_killed_as_it_makes_a_lost_topic_again_copies_every_record_once_after_its_restart(
        kind, killed, request, tmp_path):
    """SIGKILLed the moment it says the loss (before the topic is made again), or the moment it
    made it again (nothing copied into it yet), the exactly-once job started again from its
    checkpoint finds the loss where it left it (the provenance's lost id, missing or beside the
    new topic's) and copies every source record into the new topic once."""
    with _copied_once(kind, request, tmp_path) as scene:
        name, first_log, second_log = scene.name, scene.log_path, tmp_path / "second.log"
        delete_topic(scene.destination_admin, name)
        new = produce_values(scene.source, name, "new", 1_334, PARTITIONS)

        def reached() -> bool:
            text = first_log.read_text()
            return "was deleted: what the job had copied" in text and (
                killed == "said" or text.count("created 1 destination topic") == 2)

        wait_until(lambda: scene.job.poll() is not None or reached(), f"the loss {killed}", 240, poll_s=0.05)
        scene.job.send_signal(signal.SIGKILL)
        scene.job.wait(30)
        scene.job = _start(scene.source, scene.destination, scene.topics, tmp_path, second_log)
        _wait_copied(scene.job, scene.destination, name, _joined(scene.old, new),
                     "every source record in the topic made again", second_log)
        time.sleep(3)
        assert read_values(scene.destination, name, PARTITIONS) == _joined(scene.old, new)
        text = first_log.read_text() + second_log.read_text()
        assert "outage" not in text and "Traceback" not in second_log.read_text(), text[-3000:]
