"""A destination topic lost under the job (issue 70, item 3): which topics are losses, what
each owner's loss leads to, the commits and ranges that name the destination topic's id, and
the driver's file the planner reads. The end-to-end cases, on real Kafka and the embedded
broker, are tests/realkafka/test_real_destination_lost.py."""

from __future__ import annotations

import json
import logging
import uuid

import pytest

from kcodecs import read_batch
from mirror.config import load_config
from mirror.engine.destination_loss import (DestinationLoss, DestinationLostError, lost_destinations,
                                            recreated_or_fail)
from mirror.engine.offsets_topic import Commit, decode_offsets, encode_offsets
from mirror.engine.provenance import Provenance, _decode, _encode
from mirror.engine.ranges import CopyRequest
from mirror.kafka import TopicPartition
from mirror.kafka.types import TopicListing
from mirror.spark.rewinds import DestinationLosses, read_rewinds, unrewound

OLD, NEW = str(uuid.UUID(int=1)), str(uuid.UUID(int=2))


def _record(created: bool, topic_id: str | None) -> Provenance:
    return Provenance(("src-cluster",), "s", created=created, partitioning="preserve", topic_id=topic_id)


def test_only_a_topic_the_job_copied_into_is_a_loss_and_a_new_one_is_created_as_new():
    named = {"a": "m.a", "b": "m.b", "c": "m.c", "d": "m.d", "e": "m.e", "f": "m.f"}
    listed = {"m.c": TopicListing(3, uuid.UUID(NEW)), "m.f": TopicListing(3, uuid.UUID(OLD))}
    records = {"m.a": _record(True, OLD),  # kmirror's, deleted
               "m.b": _record(True, None),  # written before a creation that never happened: new
               "m.c": _record(True, OLD),  # kmirror's, deleted and made again (a run ended in between)
               "d": _record(False, None),  # another topic's record
               "m.e": _record(False, None),  # the user's, from before ids were kept: deleted
               "m.f": _record(False, OLD)}  # the user's, there as it was
    assert lost_destinations(named, listed, records) == [
        DestinationLoss("a", "m.a", OLD, True),
        DestinationLoss("c", "m.c", OLD, True, made_again=True),
        DestinationLoss("e", "m.e", "unknown", False)]


def test_a_loss_kmirror_made_is_copied_again_unless_asked_to_fail_and_the_users_never_is():
    ours, theirs = DestinationLoss("a", "a", OLD, True), DestinationLoss("b", "b", OLD, False)
    remade = DestinationLoss("c", "c", OLD, False, made_again=True)  # the user made theirs again
    assert recreated_or_fail([ours, theirs, remade], "recreate") == [ours, remade]
    assert recreated_or_fail([theirs], "fail") == []
    assert recreated_or_fail([theirs, remade], "fail") == [remade]  # the policy is about kmirror's topics
    with pytest.raises(DestinationLostError, match=f"^destination topic a \\(topic id {OLD}\\) was deleted: what the "
                                                   f"job had copied of a into it is gone; --on-destination-lost fail"):
        recreated_or_fail([theirs, ours], "fail")


def test_commits_and_provenance_name_the_destination_topic_and_an_old_one_is_not_the_new_ones():
    tp = TopicPartition("t", 0)
    (record,) = read_batch(bytes(encode_offsets({tp: 40}, 1, {"t": OLD}, {"t": NEW}))).records()
    assert json.loads(bytes(record.value)) == {"offset": 40, "topic_id": OLD, "destination_id": NEW}
    assert decode_offsets(record) == (tp, Commit(40, OLD, NEW))
    assert Commit(40, OLD, NEW).of(OLD, NEW) and not Commit(40, OLD, OLD).of(OLD, NEW)
    assert Commit(40, OLD, None).of(OLD, NEW) and Commit(40, OLD, NEW).of(OLD)  # not known: whichever
    assert CopyRequest(tp, 0, 9, topic_id=OLD, destination_id=NEW).of_another_topic_than(
        CopyRequest(tp, 0, 9, topic_id=OLD, destination_id=OLD))
    assert not CopyRequest(tp, 0, 9, topic_id=OLD, destination_id=NEW).of_another_topic_than(
        CopyRequest(tp, 0, 9, topic_id=OLD))
    kept = _record(True, NEW)
    (written,) = read_batch(_batch(kept)).records()
    assert json.loads(bytes(written.value))["topic_id"] == NEW and _decode(written) == ("m.a", kept)


def _batch(provenance: Provenance) -> bytes:
    import kcodecs
    from kcodecs import Record

    return kcodecs.build_batch([Record(key=b"m.a", value=_encode(provenance), timestamp=1)])


def test_the_driver_writes_each_loss_it_copies_again_before_the_planner_needs_it(tmp_path, caplog):
    config = load_config(None, {"source.bootstrap": "h:1", "destination.bootstrap": "h:2", "topics": "t",
                                "checkpoint": str(tmp_path / "ck")})
    losses = DestinationLosses(config)
    ours, theirs = DestinationLoss("a", "a", OLD, True), DestinationLoss("b", "b", NEW, False)
    with caplog.at_level(logging.WARNING, logger="mirror.spark.rewinds"):
        losses([ours, theirs])
        losses([theirs])  # found again at the next look: said once
    assert read_rewinds(losses.path) == {"a": OLD} and losses.path.parent == tmp_path / "ck"
    assert losses.pending == {"a"} and list(losses.failed) == ["b"]
    assert [r.levelname for r in caplog.records] == ["WARNING", "ERROR"]
    assert caplog.records[0].getMessage().endswith("kmirror makes it again as it made it, and copies a again from "
                                                   "its log start")
    losses([DestinationLoss("c", "c", NEW, True)])
    assert read_rewinds(losses.path) == {"a": OLD, "c": NEW}
    assert unrewound(read_rewinds(losses.path), {"a": OLD}) == {"c"}
    assert unrewound({"a": NEW}, {"a": OLD}) == {"a"}  # lost a second time
    # The user makes theirs again while the job runs: it is copied again, not left failed.
    assert losses([DestinationLoss("b", "b", NEW, False, made_again=True)]) == [
        DestinationLoss("b", "b", NEW, False, made_again=True)]
    assert "b" not in losses.failed and read_rewinds(losses.path)["b"] == NEW
