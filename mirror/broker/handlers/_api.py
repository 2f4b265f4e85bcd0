"""What a handler module declares about its API, read by the server's dispatch and by
ApiVersions."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Api"]


@dataclass(frozen=True)
class Api:
    """A Kafka API this broker serves: its key, the versions it really implements (which
    ApiVersions advertises exactly) and kafka-python's request schema class."""

    key: int
    min_version: int
    max_version: int
    request: type
