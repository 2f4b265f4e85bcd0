"""Topic ACLs through the admin API: DescribeAcls and CreateAcls (KIP-140, with the pattern
types of KIP-290), what MirrorMaker 2's ACL sync asks of Kafka's ``Admin``
(``MirrorSourceConnector.listTopicAclBindings`` and ``updateTopicAcls``).

A binding is Kafka's ``AclBinding``: a resource pattern (type, name, pattern type) and an
access control entry (principal, host, operation, permission), every enum with Kafka's own
codes (``ResourceType``, ``PatternType``, ``AclOperation``, ``AclPermissionType``), which are
also the wire's. A code this module does not know (a newer broker's) reads as ``UNKNOWN``, as
Kafka's ``fromCode`` does.

A cluster without an authorizer answers SECURITY_DISABLED ("No Authorizer is configured.",
Kafka's ``AclApis``): it holds no ACLs, which is an answer, not a failure, so
:func:`describe_topic_acls` returns None for it. Both APIs need v1 (Kafka 2.0, KIP-290): v0
has no pattern type, and kafka-python's schemas start at v1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import kafka.errors as kerr
from kafka.protocol.admin import CreateAclsRequest, DescribeAclsRequest

from ..protocol.codes import KafkaCode
from .client import KafkaClient
from .connection import ProtocolError
from .errors import BrokerApiError

__all__ = ["ResourceType", "PatternType", "AclOperation", "AclPermissionType", "AclBinding", "describe_topic_acls",
           "create_acls"]


class ResourceType(KafkaCode):
    """``org.apache.kafka.common.resource.ResourceType``; ANY is for filters only."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(KafkaCode):
    """``org.apache.kafka.common.resource.PatternType`` (KIP-290); ANY and MATCH are for filters only."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(KafkaCode):
    """``org.apache.kafka.common.acl.AclOperation``; ANY is for filters only."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(KafkaCode):
    """``org.apache.kafka.common.acl.AclPermissionType``; ANY is for filters only."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True)
class AclBinding:
    """One ACL: who (``principal``, from ``host``, "*" for any) may or may not (``permission``)
    do ``operation`` on the resources the pattern names."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


def describe_topic_acls(client: KafkaClient) -> list[AclBinding] | None:
    """Every ACL on topics, of any pattern type (MM2's ``ANY_TOPIC_ACL`` filter); None if the
    cluster has no authorizer."""
    request = DescribeAclsRequest(resource_type_filter=int(ResourceType.TOPIC), resource_name_filter=None,
                                  pattern_type_filter=int(PatternType.ANY), principal_filter=None, host_filter=None,
                                  operation=int(AclOperation.ANY), permission_type=int(AclPermissionType.ANY))

    def attempt() -> list[AclBinding] | None:
        response = client.call(request)
        if response.error_code == kerr.SecurityDisabledError.errno:
            return None
        if response.error_code:
            raise BrokerApiError.from_code("DescribeAcls", response.error_code, detail=response.error_message)
        return [AclBinding(ResourceType.of(r.resource_type), r.resource_name, PatternType.of(r.pattern_type),
                           a.principal, a.host, AclOperation.of(a.operation), AclPermissionType.of(a.permission_type))
                for r in response.resources for a in r.acls]

    return client.retrying("describe topic ACLs", attempt)


def create_acls(client: KafkaClient, bindings: Sequence[AclBinding]) -> list[BrokerApiError | None]:
    """Create each binding; for each, in order, None where the cluster holds it now (one it
    held already counts: Kafka's authorizers treat it as created), else the broker's refusal.

    A retriable refusal retries the whole request, which is safe: creating a binding twice
    leaves one."""
    creation = CreateAclsRequest.AclCreation
    request = CreateAclsRequest(creations=[
        creation(resource_type=int(b.resource_type), resource_name=b.name, resource_pattern_type=int(b.pattern_type),
                 principal=b.principal, host=b.host, operation=int(b.operation), permission_type=int(b.permission))
        for b in bindings])

    def attempt() -> list[BrokerApiError | None]:
        results = client.call(request).results
        if len(results) != len(bindings):
            raise ProtocolError(f"CreateAcls answered {len(results)} results for {len(bindings)} bindings")
        refusals = [None if not r.error_code else BrokerApiError.from_code("CreateAcls", r.error_code, topic=b.name,
                                                                           detail=r.error_message)
                    for b, r in zip(bindings, results)]
        retriable = next((e for e in refusals if e is not None and e.retriable), None)
        if retriable is not None:
            raise retriable
        return refusals

    return client.retrying("create ACLs", attempt) if bindings else []
