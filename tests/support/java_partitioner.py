"""Where Java's producer puts a key: the verdict for every by-key placement test.

librdkafka's ``murmur2_random`` partitioner is Java's ``DefaultPartitioner`` (murmur2 of the
key, positive, modulo the count). The answer is read from where librdkafka really wrote each
key, on the cluster under test, so nothing of kmirror's routing is asked.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from librdkafka_reader import read_values


def java_partitions(bootstrap: str, keys: list[bytes], partitions: int) -> dict[bytes, int]:
    """Each key's partition among ``partitions``, as Java's producer would choose it."""
    topic = f"oracle.murmur2-{partitions}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the future is done
    (future,) = admin.create_topics([NewTopic(topic, partitions)]).values()
    try:
        future.result(30)
    except KafkaException as exc:  # asked before on this cluster: the same answer again
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    for key in keys:
        producer.produce(topic, key=key, value=b"")
    assert producer.flush(30) == 0
    placed = read_values(bootstrap, topic, partitions, take=lambda m: m.key())
    return {key: partition for partition, keys_ in placed.items() for key in keys_}
