"""Failures the broker reports to clients as Kafka error codes.

The codes come from kafka-python's ``kafka.errors`` classes (``errno``), not typed again
here, so they cannot drift from Kafka's ``Errors.java``.
"""

from __future__ import annotations

import kafka.errors as kerr

from kcodecs import KMirrorError

__all__ = ["ApiError", "kerr"]


class ApiError(KMirrorError):
    """A request (or one partition of it) that fails with a Kafka error code and a message."""

    def __init__(self, error: type[kerr.BrokerResponseError], message: str):
        super().__init__(f"{error.__name__}: {message}")
        self.error = error
        self.code: int = error.errno
        self.message = message
