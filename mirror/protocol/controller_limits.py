"""What one CreateTopics request may ask of a KRaft controller, as both sides must agree on it.

Kafka's controller refuses a whole CreateTopics request that is too big, with
POLICY_VIOLATION for every topic in it, in two places (read from the jars of Apache Kafka
3.9.2 and 4.4.0, where both values are the same):

- ``ReplicationControlManager.validateTotalNumberOfPartitions``: more than
  ``MAX_PARTITIONS_PER_BATCH`` (10,000) partitions in the request, counting every topic named,
  even one that exists: "Excessively large number of partitions per request.";
- ``ReplicationControlManager.createTopics`` collects the metadata records it will write in
  a ``BoundedList`` of ``QuorumController.MAX_RECORDS_PER_USER_OP`` (10,000): one
  ``TopicRecord`` per new topic, one ``PartitionRecord`` per partition and one ``ConfigRecord``
  per config it sets. One more and the list throws ``BoundedListTooLongException``, which the
  controller answers as "Unable to perform excessively large batch operation.".

So 1,000 topics of 10 partitions (10,000 partitions, 11,000 records) fit the first cap and not
the second. The client splits its requests by :func:`creation_records` (:mod:`mirror.kafka.topic_creation`),
and the embedded broker refuses what Kafka's controller would (:mod:`mirror.broker.handlers.create_topics`).
"""

from __future__ import annotations

__all__ = ["MAX_PARTITIONS_PER_REQUEST", "MAX_RECORDS_PER_REQUEST", "TOO_MANY_PARTITIONS", "TOO_MANY_RECORDS",
           "creation_records", "is_too_large"]

MAX_PARTITIONS_PER_REQUEST = 10_000
"""``ReplicationControlManager.MAX_PARTITIONS_PER_BATCH``."""
MAX_RECORDS_PER_REQUEST = 10_000
"""``QuorumController.MAX_RECORDS_PER_USER_OP``."""
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."
TOO_MANY_RECORDS = "Unable to perform excessively large batch operation."


def creation_records(partitions: int, configs: int) -> int:
    """The metadata records creating one topic writes: its TopicRecord, a PartitionRecord per
    partition, a ConfigRecord per config set."""
    return 1 + partitions + configs


def is_too_large(message: str | None) -> bool:
    """Whether a POLICY_VIOLATION's message is one of the two refusals above: the request was
    too big, not the topic refused (a create-topic policy says something else)."""
    return message is not None and "excessively large" in message.lower()
