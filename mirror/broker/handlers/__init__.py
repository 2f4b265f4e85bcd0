"""One module per Kafka API; each declares ``API`` (an :class:`~._api.Api`: key, versions and
kafka-python's request schema class) and ``async def handle(request, version, state)``.

The hot path's two APIs replace kafka-python's codec where it copies record sets: Produce
defines ``decode(frame, version)`` (the request after its size prefix) and Fetch
``encode(response, version, correlation_id)`` (a framed response as a list of buffers), both
from :mod:`mirror.protocol`, the layer the broker shares with the client.

The versions are the ones this broker really implements, and ApiVersions advertises
exactly these ranges.
"""

from __future__ import annotations

from types import ModuleType

from . import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    api_versions,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_configs,
    describe_groups,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_fetch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
    txn_offset_commit,
)

HANDLERS: dict[int, ModuleType] = {
    module.API.key: module
    for module in (api_versions, metadata, create_topics, describe_configs, produce, fetch, list_offsets, init_producer_id,
                   find_coordinator, add_partitions_to_txn, add_offsets_to_txn, end_txn, txn_offset_commit,
                   join_group, sync_group, heartbeat, leave_group, offset_commit, offset_fetch, list_groups,
                   describe_groups, delete_groups, sasl_handshake, sasl_authenticate, delete_topics, delete_records,
                   describe_acls, create_acls, delete_acls, alter_configs, create_partitions, incremental_alter_configs)
}
