"""Which topic a name stands for (mirror.engine.topic_identity): the ids a plan keeps, the
topics whose listed id is not the one planned, and what ``--on-topic-recreated`` does then."""

from __future__ import annotations

import uuid

import pytest

from mirror.engine.topic_identity import Identities, Recreated, TopicRecreatedError, check_identities, follow_or_fail
from mirror.kafka import TopicListing
from mirror.spark.offsets import TOPIC_IDS, format_offsets, parse_offsets, parse_topic_ids
from mirror.kafka import TopicPartition

A, B = uuid.UUID(int=1 << 100), uuid.UUID(int=2 << 100)


def test_ids_are_kept_for_topics_listed_and_for_topics_gone():
    known = {"gone": str(B)}
    assert check_identities(known, {"orders": TopicListing(3, A)}) == Identities({"orders": str(A), "gone": str(B)})


def test_a_cluster_without_ids_keeps_what_was_known():
    assert check_identities({"orders": str(A)}, {"orders": TopicListing(3, None)}) == Identities({"orders": str(A)})
    assert check_identities({}, {"orders": TopicListing(3, None)}) == Identities({})


def test_another_id_under_a_known_name_is_followed_or_stops_the_job_with_both_ids():
    found = check_identities({"orders": str(A)}, {"orders": TopicListing(3, B), "other": TopicListing(1, A)})
    assert found == Identities({"orders": str(B), "other": str(A)}, (Recreated("orders", str(A), str(B)),))
    assert follow_or_fail(found, "follow") == {"orders"}
    with pytest.raises(TopicRecreatedError) as raised:
        follow_or_fail(found, "fail")
    assert (raised.value.topic, raised.value.old_id, raised.value.new_id) == ("orders", str(A), str(B))
    assert str(raised.value).startswith(f"source topic orders was deleted and made again (topic id {A} is now {B})")
    assert follow_or_fail(Identities({"orders": str(A)}), "fail") == frozenset()


def test_the_ids_ride_in_the_offsets_without_being_taken_for_a_partition():
    offsets = {TopicPartition("orders", 0): 5, TopicPartition("orders", 1): 7}
    formatted = format_offsets(offsets, {"orders": str(A)})
    assert formatted == {"orders/0": 5, "orders/1": 7, TOPIC_IDS: {"orders": str(A)}}
    assert parse_offsets(formatted) == offsets and parse_topic_ids(formatted) == {"orders": str(A)}
    # A checkpoint written before ids: no key, no ids.
    assert parse_topic_ids({"orders/0": 5}) == {} and format_offsets(offsets) == {"orders/0": 5, "orders/1": 7}
