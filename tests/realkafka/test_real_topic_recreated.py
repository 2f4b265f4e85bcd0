"""A source topic deleted and made again under a running mirror (issue 70), on real Kafka 4.4
and on the embedded broker: the job follows the new topic from its log start (the default), or
stops naming both ids (``--on-topic-recreated fail``). MirrorMaker 2 goes on from the old
topic's offsets in the new one, and silently skips its first records.

The scenario is the issue's: the job has copied all 6,000 records of a 3-partition topic; the
topic is deleted, made again (with 3 partitions, or 4) and given 3,000 new records a partition,
past the 2,000 the job had reached, which is where MirrorMaker 2 lost records. The verdict is
librdkafka's read_committed reading at the destination: the old topic's records as they were
copied, then every record of the new topic once, in order. The ids in the lines are librdkafka's
(DescribeTopics). Resident copiers (the long-running job's default) and copy tasks alike.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka.admin import AdminClient

from librdkafka_reader import read_values
from in_process import kmirror
from live_source import wait_until
from topic_lifecycle import clusters, create_topic, delete_topic, produce_values, topic_id

pytestmark = [pytest.mark.slow, pytest.mark.interop, pytest.mark.timeout(600)]

PARTITIONS = 3


def _job(name: str) -> str:
    """The job's name: one per test's topic (whose name is unique)."""
    return "recreated-" + name.rsplit(".", 1)[-1]


def _start(source: str, destination: str, name: str, tmp_path, log_path, *options: str) -> subprocess.Popen:
    with open(log_path, "w") as log_file:
        return subprocess.Popen(
            [sys.executable, "-m", "mirror.cli", "run", "--source", source, "--destination", destination,
             "--topics", name.replace(".", r"\."), "--name", _job(name),
             "--checkpoint", str(tmp_path / "ck"), "--trigger-interval", "1", "--master", "local[2]", *options],
            stdout=subprocess.DEVNULL, stderr=log_file)


def _stop(job: subprocess.Popen) -> None:
    if job.poll() is None:
        job.kill()
        job.wait(30)


def _delete_once_copied(job: subprocess.Popen, admin: AdminClient, destination: str, name: str,
                        old: dict[int, list[bytes]], log_path) -> None:
    """Wait for the running ``job`` to copy the old topic's records, then delete the topic."""
    wait_until(lambda: job.poll() is not None or read_values(destination, name, PARTITIONS) == old,
               "the old topic's 6,000 records at the destination", 240, poll_s=1)
    assert job.poll() is None, log_path.read_text()[-3000:]
    delete_topic(admin, name)


@pytest.mark.parametrize("kind, delivery, copiers, partitions_after", [
    ("kafka", "exactly-once", True, PARTITIONS),
    ("kafka", "at-least-once", False, PARTITIONS + 1),
    ("embedded", "exactly-once", False, PARTITIONS + 1),
    ("embedded", "at-least-once", True, PARTITIONS),
], ids=["kafka-exactly-once-copiers", "kafka-at-least-once-tasks-more-partitions",
        "embedded-exactly-once-tasks-more-partitions", "embedded-at-least-once-copiers"])
def test_a_source_topic_made_again_is_followed_from_its_start_and_each_new_record_copied_once(
        kind, delivery, copiers, partitions_after, request, tmp_path):
    name = f"orders.{kind}.{time.time_ns()}"
    with clusters(kind, request, tmp_path) as (source, destination):
        admin = AdminClient({"bootstrap.servers": source})
        create_topic(admin, name, PARTITIONS)
        old = produce_values(source, name, "old", 2_000, PARTITIONS)
        old_id = topic_id(admin, name)
        log_path = tmp_path / "run.log"
        job = _start(source, destination, name, tmp_path, log_path, "--delivery", delivery,
                     *(() if copiers else ("--no-copy-between-micro-batches",)))
        try:
            _delete_once_copied(job, admin, destination, name, old, log_path)
            create_topic(admin, name, partitions_after)
            new = produce_values(source, name, "new", 3_000, partitions_after)
            new_id = topic_id(admin, name)
            expected = {p: old.get(p, []) + new[p] for p in range(partitions_after)}
            wait_until(lambda: job.poll() is not None or _copied(destination, name, partitions_after) == expected,
                       "the new topic's records after the old one's", 240, poll_s=2)
            assert job.poll() is None, log_path.read_text()[-3000:]
            # Stopped as an operator stops it before verifying: a SIGKILLed copier's open
            # transaction would hold read_committed readers, verify's included, until it times out.
            job.send_signal(signal.SIGTERM)
            assert job.wait(120) == 0, log_path.read_text()[-3000:]
        finally:
            _stop(job)
        text = log_path.read_text()
        # Every record of the new topic once, after the old topic's as they were copied.
        assert read_values(destination, name, partitions_after) == expected
        restarts = ", ".join(f"{p} from 0" for p in range(partitions_after))
        assert f"source topic {name} was deleted and made again (topic id {old_id} is now {new_id}): following the " \
               f"new topic from its log start (partition {restarts})" in text, text[-3000:]
        assert "Traceback" not in text
        # verify compares the topic the source has now, and says the old one's copies have no source.
        verified = kmirror("verify", "--source", source, "--destination", destination, "--topics",
                           name.replace(".", r"\."), "--name", _job(name), "--master", "local[2]", "--json")
        assert verified.returncode == 0, verified
        (report,) = json.loads(verified.stdout)
        assert (report["findings"], report["topic_id"], report["earlier_ids"]) == ([], str(new_id), [str(old_id)])
        assert report["destination_total"] == 2_000 * PARTITIONS + 3_000 * partitions_after
        # Stopped cleanly, the job synced and committed all it copied: all of the new topic is compared.
        assert report["source_records"] == report["destination_records"] == 3_000 * partitions_after
        assert report["not_covered"] == 2_000 * PARTITIONS  # the old topic's copies


def _copied(destination: str, name: str, partitions: int) -> dict[int, list[bytes]] | None:
    """What the destination holds, or None while it does not have all the partitions yet."""
    try:
        return read_values(destination, name, partitions)
    except Exception:  # the destination topic not grown yet: librdkafka cannot read a partition it lacks
        return None


@pytest.mark.parametrize("kind", ["kafka", "embedded"])
def test_on_topic_recreated_fail_stops_the_job_naming_both_ids_and_nothing_of_the_new_topic_is_copied(
        kind, request, tmp_path):
    name = f"orders.{kind}.{time.time_ns()}"
    with clusters(kind, request, tmp_path) as (source, destination):
        admin = AdminClient({"bootstrap.servers": source})
        create_topic(admin, name, PARTITIONS)
        old = produce_values(source, name, "old", 2_000, PARTITIONS)
        old_id = topic_id(admin, name)
        log_path = tmp_path / "run.log"
        job = _start(source, destination, name, tmp_path, log_path, "--delivery", "exactly-once",
                     "--on-topic-recreated", "fail")
        try:
            _delete_once_copied(job, admin, destination, name, old, log_path)
            create_topic(admin, name, PARTITIONS)
            produce_values(source, name, "new", 3_000, PARTITIONS)
            new_id = topic_id(admin, name)
            assert job.wait(180) == 1, log_path.read_text()[-3000:]
        finally:
            _stop(job)
        text = log_path.read_text()
        assert f"source topic {name} was deleted and made again (topic id {old_id} is now {new_id}): the job's " \
               f"offsets are the old topic's, and --on-topic-recreated fail stopped the job" in text, text[-3000:]
        assert "Traceback" not in text
        # The old topic's records stay as they were copied; none of the new topic's came after them.
        assert read_values(destination, name, PARTITIONS) == old


@pytest.mark.parametrize("kind, delivery", [("kafka", "exactly-once"), ("kafka", "at-least-once"),
                                            ("embedded", "exactly-once"), ("embedded", "at-least-once")])
def test_a_source_topic_deleted_and_not_made_again_is_said_once_and_the_others_go_on(kind, delivery, request,
                                                                                     tmp_path):
    """Issue 70, item 4: the job stops copying a deleted topic, says so once, and copies on the
    other topics; no outage, since the source answers (before, the copy of the deleted topic's
    partitions retried as for an outage and held the micro-batch up)."""
    suffix = time.time_ns()  # this test's topics only: the Kafka pair is the module's
    name, other = f"gone.{kind}.{suffix}", f"stays.{kind}.{suffix}"
    with clusters(kind, request, tmp_path) as (source, destination):
        admin = AdminClient({"bootstrap.servers": source})
        create_topic(admin, name, PARTITIONS)
        create_topic(admin, other, PARTITIONS)
        gone = produce_values(source, name, "gone", 500, PARTITIONS)
        first = produce_values(source, other, "first", 500, PARTITIONS)
        gone_id = topic_id(admin, name)
        log_path = tmp_path / "run.log"
        with open(log_path, "w") as log_file:
            job = subprocess.Popen(
                [sys.executable, "-m", "mirror.cli", "run", "--source", source, "--destination", destination,
                 "--topics", rf"(gone|stays)\.{kind}\.{suffix}", "--name", f"gone-{time.time_ns()}",
                 "--checkpoint", str(tmp_path / "ck"), "--trigger-interval", "1", "--master", "local[2]",
                 "--delivery", delivery],
                stdout=subprocess.DEVNULL, stderr=log_file)
        try:
            wait_until(lambda: job.poll() is not None or (read_values(destination, name, PARTITIONS) == gone
                                                          and read_values(destination, other, PARTITIONS) == first),
                       "both topics at the destination", 240, poll_s=1)
            delete_topic(admin, name)
            then = produce_values(source, other, "then", 500, PARTITIONS)
            expected = {p: first[p] + then[p] for p in range(PARTITIONS)}
            wait_until(lambda: job.poll() is not None or read_values(destination, other, PARTITIONS) == expected,
                       "the other topic's new records", 240, poll_s=1)
            time.sleep(5)  # a few triggers more: the line is said once, not at each
            assert job.poll() is None, log_path.read_text()[-3000:]
        finally:
            _stop(job)
        text = log_path.read_text()
        line = f"source topic {name} (topic id {gone_id}) is not listed by the source any more (deleted): the job " \
               f"stops copying it and goes on with the others"
        assert text.count(line) == 1, text[-3000:]
        assert "outage" not in text and "Traceback" not in text, text[-3000:]
        assert read_values(destination, name, PARTITIONS) == gone  # what was copied of it stays
