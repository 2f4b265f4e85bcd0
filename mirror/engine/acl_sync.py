"""Topic ACLs copied from source to destination, as MirrorMaker 2 copies them
(``sync.topic.acls.enabled``, every ``sync.topic.acls.interval.seconds``, default 600) in
``MirrorSourceConnector.syncTopicAcls``:

1. every topic ACL at the source (DescribeAcls with MM2's ``ANY_TOPIC_ACL`` filter);
2. kept: TOPIC resources, LITERAL patterns, naming a mirrored topic. A PREFIXED pattern
   would need a prefix renamed, which a replication policy does not define; the wildcard
   ``*`` names no mirrored topic (MM2 with a catch-all topic filter copies it as a literal
   ACL on a topic named ``source.*``, which grants nothing);
3. ALLOW WRITE dropped (``shouldReplicateAcl``) and ALLOW ALL made ALLOW READ
   (``downgradeAllowAllACL``): a destination topic is written by the mirror alone, so its
   consumers may follow it there but its producers may not (their records would interleave
   with the mirror's). DENY entries are copied as they are: they only take rights away;
4. named for the destination topic (``targetAclBinding``);
5. created at the destination (CreateAcls). MM2 sends every binding every time (Kafka takes
   an existing binding as created); kmirror reads the destination's first and creates only
   those it lacks, so a steady mirror sends nothing and each creation is logged once.

Read-only, as MM2: an ACL removed at the source stays at the destination, and nothing at the
destination is ever deleted.

A cluster without an authorizer (SECURITY_DISABLED) has no ACLs to give or take: that is
logged once per cluster at INFO, later syncs skip it at DEBUG (MM2's ``noAclAuthorizer``, for
the source; kmirror treats the destination the same way, where MM2 would warn per binding at
every interval).
"""

from __future__ import annotations

import logging
from typing import Iterable, Mapping

from ..kafka import KafkaClient
from ..kafka.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType, create_acls, \
    describe_topic_acls

__all__ = ["target_bindings", "sync_topic_acls"]

log = logging.getLogger(__name__)

_told_no_authorizer: set[str] = set()
"""Clusters (bootstrap addresses) already reported at INFO as having no authorizer, in this process."""


def target_bindings(source_bindings: Iterable[AclBinding], topics: Mapping[str, str]) -> list[AclBinding]:
    """The destination's bindings for the source's, by MM2's rules (``topics``: source topic ->
    destination topic, the mirrored ones); in source order, each once."""
    return list(dict.fromkeys(_target(b, topics[b.name]) for b in source_bindings
                              if b.resource_type is ResourceType.TOPIC and b.pattern_type is PatternType.LITERAL
                              and not _allows(b, AclOperation.WRITE) and b.name in topics))


def sync_topic_acls(source: KafkaClient, destination: KafkaClient, topics: Mapping[str, str]) -> list[AclBinding]:
    """Create at the destination the topic ACLs it lacks (``topics``: source topic ->
    destination topic); the bindings created. A binding the destination refuses is logged and
    tried again at the next sync; the others go on."""
    if not topics:
        return []
    found = _topic_acls("source", source)
    wanted = target_bindings(found, topics) if found is not None else []
    present = _topic_acls("destination", destination) if wanted else None
    if present is None:
        return []
    held = set(present)
    missing = [b for b in wanted if b not in held]
    created = []
    for binding, refusal in zip(missing, create_acls(destination, missing)):
        if refusal is not None:
            log.warning("ACL not synced to topic %s: %s: %s", binding.name, _entry(binding), refusal)
            continue
        log.info("synced ACL to topic %s: %s", binding.name, _entry(binding))
        created.append(binding)
    return created


def _allows(binding: AclBinding, operation: AclOperation) -> bool:
    return binding.permission is AclPermissionType.ALLOW and binding.operation is operation


def _target(binding: AclBinding, topic: str) -> AclBinding:
    operation = AclOperation.READ if _allows(binding, AclOperation.ALL) else binding.operation
    return AclBinding(ResourceType.TOPIC, topic, PatternType.LITERAL, binding.principal, binding.host, operation,
                      binding.permission)


def _entry(binding: AclBinding) -> str:
    """The entry for a log line: "User:alice READ ALLOW from *"."""
    return f"{binding.principal} {binding.operation.name} {binding.permission.name} from {binding.host}"


def _topic_acls(side: str, client: KafkaClient) -> list[AclBinding] | None:
    """The cluster's topic ACLs; None, said once per cluster, where it has no authorizer."""
    found = describe_topic_acls(client)
    if found is None:
        _no_authorizer(side, client)
    return found


def _no_authorizer(side: str, client: KafkaClient) -> None:
    if client.bootstrap in _told_no_authorizer:
        log.debug("%s cluster %s still has no ACL authorizer; skipping topic ACL sync", side, client.bootstrap)
        return
    _told_no_authorizer.add(client.bootstrap)
    log.info("no ACL authorizer on the %s cluster %s, so no topic ACLs are synced (turn topic ACL sync off to "
             "stop asking)", side, client.bootstrap)
