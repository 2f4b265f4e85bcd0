"""Real Apache Kafka for kmirror's tests and benchmarks: its jars fetched with Maven
(:mod:`.distribution`) and KRaft clusters started from them on loopback ports (:mod:`.cluster`).

Nothing here runs in a mirror: this is how kmirror is held to the reference implementation
(``./dev kafka start``, the ``kafka`` test marker, ``kmirror bench mirror --cluster kafka``).
"""

from .cluster import ClusterStartError, KafkaCluster, KafkaNode, TlsFiles, distribution_for
from .distribution import KAFKA_3, KAFKA_4, KAFKA_VERSIONS, Distribution, ToolchainError, toolchain_problem

__all__ = ["KafkaCluster", "KafkaNode", "TlsFiles", "ClusterStartError", "Distribution", "KAFKA_4", "KAFKA_3",
           "KAFKA_VERSIONS", "ToolchainError", "toolchain_problem", "distribution_for"]
