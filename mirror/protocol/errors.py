"""The one error of the protocol layer.

::

    KMirrorError                 (kcodecs) root of everything kmirror raises on purpose
    └── ProtocolError            bytes that do not fit the Kafka protocol

Defined here, not in the client, because both sides raise it: the client for a response that
does not fit its request, the broker's codecs for a request that does not parse. The client
re-exports it as ``mirror.kafka.ProtocolError`` (the same class).
"""

from __future__ import annotations

from kcodecs import KMirrorError

__all__ = ["ProtocolError"]


class ProtocolError(KMirrorError):
    """A message that does not fit the protocol: malformed, truncated or with bytes left over,
    a value its field cannot hold, a version not encoded here, or a response that does not fit
    its request (wrong correlation id, undecodable body)."""
