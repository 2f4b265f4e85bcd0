"""The embedded broker's group coordinator: consumer groups with Kafka's classic rebalance
protocol and committed offsets, beside :mod:`..handlers` (thin: decode, call, encode),
:mod:`..log` and :mod:`..transactions`.

- :mod:`.group`, :mod:`.member`: a group's membership and state, pure;
- :mod:`.rebalance`: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timeouts;
- :mod:`.offsets`: committed and transaction-pending offsets, pure;
- :mod:`.state_log`: where all of it is persisted and replayed from (a
  :mod:`..coordinator_log`, like the transaction coordinator's);
- :mod:`.timer`: deadlines on the broker's Clock;
- :mod:`.coordinator`: the requests, persistence and what the rest of the broker may ask;
- :mod:`.markers`: the transaction coordinator's markers for ``__consumer_offsets``.
"""

from .api import GroupDescription, JoinRequest, JoinResult, ListedGroup, MemberDescription, SyncResult
from .coordinator import GroupCoordinator, OffsetCommit
from .markers import OFFSETS_TOPIC, OffsetsTopicMarkers, offsets_partition
from .offsets import OffsetAndMetadata
from .rebalance import GroupConfig
from .state_log import GroupStateLog

__all__ = [
    "GroupCoordinator",
    "GroupConfig",
    "GroupStateLog",
    "OffsetsTopicMarkers",
    "OffsetAndMetadata",
    "OffsetCommit",
    "JoinRequest",
    "JoinResult",
    "SyncResult",
    "GroupDescription",
    "MemberDescription",
    "ListedGroup",
    "OFFSETS_TOPIC",
    "offsets_partition",
]
