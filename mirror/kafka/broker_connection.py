"""One connection to one broker, and the API versions negotiated on it (ApiVersions, KIP-35/KIP-511).

:class:`~mirror.kafka.client.KafkaClient` keeps one per broker address; this module decides
which version of each request it may send there. With SASL credentials the connection
authenticates right after ApiVersions (:mod:`.sasl`), before any other request, as Kafka's
clients do.
"""

from __future__ import annotations

import functools
import importlib.metadata
import ssl
from dataclasses import dataclass
from typing import Any

import kafka.errors as kerr
from kafka.protocol.admin import (CreateAclsRequest, CreatePartitionsRequest, CreateTopicsRequest, DescribeAclsRequest,
                                  DescribeConfigsRequest, IncrementalAlterConfigsRequest)
from kafka.protocol.admin.groups import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ProduceRequest

from .connection import ConnectionFailedError, KafkaConnection
from .errors import BrokerApiError
from .sasl import authenticate
from .security import SaslCredentials

__all__ = ["BrokerConnection", "Sent", "SPOKEN"]

# The versions this client speaks, per request: at most what kafka-python's schemas know, and
# below the topic-id versions (Fetch and Produce v13+ name topics by id only, KIP-516; the
# fetcher, which knows each topic's id, asks for Fetch v13 itself, ``highest``). The
# lower bounds: Fetch 4 / Produce 3 carry only magic-2 record sets (KIP-98); Metadata 1 has
# null for "all topics" and is_internal; ListOffsets 1 returns one offset, not a list.
SPOKEN: dict[type, tuple[int, int]] = {
    MetadataRequest: (1, MetadataRequest.max_version),
    ProduceRequest: (3, 12),
    FetchRequest: (4, 12),
    ListOffsetsRequest: (1, ListOffsetsRequest.max_version),
    CreateTopicsRequest: (0, CreateTopicsRequest.max_version),
    DescribeConfigsRequest: (0, DescribeConfigsRequest.max_version),
    InitProducerIdRequest: (0, InitProducerIdRequest.max_version),
    # v1 has the key type (transaction coordinators, KIP-98); AddPartitionsToTxn v4+ is the
    # brokers' batched form (KIP-890), clients send v0-3.
    FindCoordinatorRequest: (1, FindCoordinatorRequest.max_version),
    AddPartitionsToTxnRequest: (0, 3),
    EndTxnRequest: (0, EndTxnRequest.max_version),
    # Group administration (mirror.kafka.groups): OffsetFetch v2 fetches every partition (null
    # topics) and v8+ batches groups, which kmirror does not need; OffsetCommit v2 drops the
    # per-partition timestamp.
    OffsetFetchRequest: (2, 7),
    OffsetCommitRequest: (2, 8),
    ListGroupsRequest: (0, ListGroupsRequest.max_version),
    DescribeGroupsRequest: (0, DescribeGroupsRequest.max_version),
    # Keeping a destination shaped like its source (mirror.kafka.admin, mirror.kafka.acls):
    # ACLs from v1, which has pattern types (KIP-290), so LITERAL bindings can be told apart.
    IncrementalAlterConfigsRequest: (0, IncrementalAlterConfigsRequest.max_version),
    CreatePartitionsRequest: (0, CreatePartitionsRequest.max_version),
    DescribeAclsRequest: (1, DescribeAclsRequest.max_version),
    CreateAclsRequest: (1, CreateAclsRequest.max_version),
}
_CONNECT_TIMEOUT_S = 10.0  # Kafka's socket.connection.setup.timeout.ms


@functools.cache
def _software_version() -> str:
    """This distribution's version, for ApiVersions (KIP-511). Looked up once: reading the
    installed metadata costs about half a millisecond, and a copy opens its data-plane
    connections anew."""
    # Shipped to Spark executors as plain files, kmirror may not be an installed distribution.
    try:
        return importlib.metadata.version("kmirror")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class Sent:
    request: Any
    version: int
    correlation_id: int


class BrokerConnection:
    """One connection and the API versions negotiated on it."""

    def __init__(self, address: str, *, client_id: str, timeout_s: float, tls: ssl.SSLContext | None = None,
                 sasl: SaslCredentials | None = None):
        self.address = address
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._tls = tls
        self.features: dict[str, int] = {}
        """The cluster's finalized feature levels, as this broker said them (empty before KIP-584)."""
        self.conn = self._connect()
        try:
            self.versions = self._negotiate()
            if sasl is not None:
                authenticate(self.conn, self.versions, sasl)
        except BaseException:
            self.conn.close()
            raise

    def _connect(self) -> KafkaConnection:
        return KafkaConnection(self.address, timeout_s=self._timeout_s, client_id=self._client_id,
                               connect_timeout_s=min(self._timeout_s, _CONNECT_TIMEOUT_S), tls=self._tls)

    def _negotiate(self) -> dict[int, tuple[int, int]]:
        request = ApiVersionsRequest(client_software_name="kmirror", client_software_version=_software_version())
        try:
            response = self.conn.call(request, ApiVersionsRequest.max_version)
        except ConnectionFailedError:
            # Brokers before KIP-511 (Kafka 2.4) close the connection on an ApiVersions they do not know.
            self.conn.close()
            self.conn = self._connect()
            response = self.conn.call(request, 0)
        # UNSUPPORTED_VERSION comes as a v0 response that still lists every API (KIP-511): ask
        # again in the highest version the broker speaks, whose answer has the features (v3+).
        if response.error_code == kerr.UnsupportedVersionError.errno:
            spoken = {api.api_key: api.max_version for api in response.api_keys}.get(ApiVersionsRequest.API_KEY, 0)
            if 0 < spoken < ApiVersionsRequest.max_version:
                response = self.conn.call(request, spoken)
        if response.error_code not in (0, kerr.UnsupportedVersionError.errno):
            raise BrokerApiError.from_code("ApiVersions", response.error_code, detail=f"broker {self.address}")
        # KIP-584's finalized feature levels (v3+), such as transaction.version (KIP-890).
        self.features = {f.name: f.max_version_level for f in getattr(response, "finalized_features", None) or ()}
        return {api.api_key: (api.min_version, api.max_version) for api in response.api_keys}

    def version(self, request) -> int:
        return self.version_of(type(request))

    def version_of(self, request_class: type, highest: int | None = None) -> int:
        """The highest version of ``request_class`` both sides speak (up to ``highest`` instead
        of :data:`SPOKEN`'s, if given), or UNSUPPORTED_VERSION."""
        low, high = SPOKEN[request_class]
        high = high if highest is None else highest
        broker_low, broker_high = self.versions.get(request_class.API_KEY, (0, -1))
        version = min(high, broker_high)
        if version < max(low, broker_low):
            api = request_class.__name__.removesuffix("Request")
            raise BrokerApiError(api, kerr.UnsupportedVersionError.message, kerr.UnsupportedVersionError.errno, False,
                                 detail=f"broker {self.address} speaks v{broker_low}-{broker_high}, kmirror needs v{low}-{high}")
        return version

    def send(self, request) -> Sent:
        version = self.version(request)
        return Sent(request, version, self.conn.send(request, version))

    def receive(self, sent: Sent):
        return self.conn.receive(sent.request, sent.version, sent.correlation_id)

    def close(self) -> None:
        self.conn.close()
