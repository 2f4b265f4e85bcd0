"""A code a newer broker added reads as UNKNOWN, as Kafka's ``fromCode`` maps it, not as a failure."""

from mirror.kafka.acls import AclOperation, ResourceType
from mirror.kafka.admin import ConfigSource


def test_known_codes_read_as_their_members():
    # Kafka's codes: ResourceType.TOPIC = 2, AclOperation.READ = 3, ConfigSource.DEFAULT_CONFIG = 5
    assert ResourceType.of(2) is ResourceType.TOPIC
    assert AclOperation.of(3) is AclOperation.READ
    assert ConfigSource.of(5) is ConfigSource.DEFAULT_CONFIG


def test_a_newer_peers_code_reads_as_unknown():
    assert ResourceType.of(42) is ResourceType.UNKNOWN
    assert AclOperation.of(99) is AclOperation.UNKNOWN
    assert ConfigSource.of(77) is ConfigSource.UNKNOWN
