"""How a mirrored topic is named at the destination, and how a name tells where it came from:
MirrorMaker 2's ``ReplicationPolicy`` with its two shipped policies, and ``--rename``.

- ``identity`` (the default, MM2's ``IdentityReplicationPolicy``): the same name. A name says
  nothing of its origin, so cycles are caught by provenance instead (:mod:`mirror.engine.provenance`).
- ``prefix`` (MM2's ``DefaultReplicationPolicy``): ``{alias}.{topic}``, the source cluster's
  alias in front (``.`` is MM2's ``replication.policy.separator``, which can be another).
  A name then tells its origin, and its origin's origin (``b.a.orders`` came
  from ``a`` by way of ``b``), so a topic whose chain of aliases holds the destination's is
  never mirrored there again (``MirrorSourceConnector.isCycle``).
- ``--rename`` (a format string over ``{topic}``): any other name, origin unknown, as under identity.

The policies are table-tested against MM2's own examples (tests/config/test_replication.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

__all__ = ["ReplicationPolicy", "IdentityPolicy", "PrefixPolicy", "RenamePolicy", "SEPARATOR", "alias_of", "is_cycle"]

SEPARATOR = "."
"""Between an alias and a topic by default (MM2's ``replication.policy.separator``, default ".")."""


class ReplicationPolicy(Protocol):
    def remote_topic(self, source_alias: str, topic: str) -> str:
        """The destination's name for ``topic`` of the cluster ``source_alias``."""

    def topic_source(self, topic: str) -> str | None:
        """The alias of the cluster ``topic`` was mirrored from, if its name tells."""

    def upstream_topic(self, topic: str) -> str | None:
        """``topic``'s name on the cluster it was mirrored from, if its name tells."""


@dataclass(frozen=True)
class IdentityPolicy:
    def remote_topic(self, source_alias: str, topic: str) -> str:
        return topic

    def topic_source(self, topic: str) -> str | None:
        return None

    def upstream_topic(self, topic: str) -> str | None:
        return None


@dataclass(frozen=True)
class PrefixPolicy:
    separator: str = SEPARATOR
    """What MM2 calls ``replication.policy.separator``: a name is cut at its first occurrence,
    as ``DefaultReplicationPolicy.topicSource`` splits on it, so an alias must not contain it."""

    def remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        alias, separator, _ = topic.partition(self.separator)
        return alias if separator and alias else None

    def upstream_topic(self, topic: str) -> str | None:
        alias, separator, rest = topic.partition(self.separator)
        return rest if separator and alias else None


@dataclass(frozen=True)
class RenamePolicy:
    template: str

    def remote_topic(self, source_alias: str, topic: str) -> str:
        return self.template.format(topic=topic)

    def topic_source(self, topic: str) -> str | None:
        return None

    def upstream_topic(self, topic: str) -> str | None:
        return None


def is_cycle(policy: ReplicationPolicy, topic: str, destination_alias: str) -> bool:
    """Whether ``topic``'s name shows it came, directly or by way of other clusters, from
    ``destination_alias``: mirroring it there would copy the destination's own records back."""
    while (source := policy.topic_source(topic)) is not None:
        if source == destination_alias:
            return True
        upstream = policy.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return False
        topic = upstream
    return False


_NOT_ALIAS = re.compile(r"[^a-zA-Z0-9_-]+")


def alias_of(bootstrap: str) -> str:
    """A cluster alias derived from its first bootstrap address: letters, digits, '_' and '-'
    only, so that it can never contain the separator (``127.0.0.1:9092`` -> ``127-0-0-1-9092``).
    Name clusters with ``--source-alias``/``--destination-alias`` where addresses differ
    between the jobs that mirror them (a load balancer, a second listener)."""
    return _NOT_ALIAS.sub("-", bootstrap.split(",")[0].strip()).strip("-") or "cluster"
