"""The Kafka protocol layer that neither the client nor the broker owns: Produce and Fetch
encoded by hand, so record sets cross it as views, never copies.

The client (``mirror.kafka``) encodes Produce and Fetch requests and reads their responses;
the embedded broker (``mirror.broker``) decodes Produce requests and encodes both responses.
Both import this package and neither imports the other, as franz-go's client (``kgo``) and
fake broker (``kfake``) share ``kmsg``. It depends on nothing but :mod:`kcodecs` (its
unsigned varints).

Every other API goes through kafka-python's generated schemas (``kafka.protocol``), which
copy each record set into the message and again into its encoding. On the hot path that is
most of the CPU, so these two messages are written down here once, field by field, and
tested byte for byte against kafka-python at every version (``tests/protocol/``). Encoders
return a list of buffers for ``socket.sendmsg`` (scatter-gather): small ``bytes`` pieces
interleaved with the callers' own record buffers. Decoders return record sets as
``memoryview`` slices of the buffer they were given.

One module per job:

- :mod:`.primitives`: the field codec both messages share (classic and flexible encodings,
  KIP-482, tabulated there) and the request header;
- :mod:`.produce` and :mod:`.fetch`: each API's schemas, in their docstrings, and its codec;
- :mod:`.errors`: :class:`ProtocolError`.

Anything malformed or truncated raises :class:`ProtocolError` (also ``mirror.kafka.ProtocolError``),
never ``struct.error``, ``IndexError`` or :class:`kcodecs.VarintError`; so does a body with
bytes left over after its last field, which can only mean it was framed or versioned wrongly.
"""

from .errors import ProtocolError
from .fetch import (
    FETCH_VERSIONS,
    FetchedPartition,
    FetchPosition,
    FetchResponseData,
    decode_fetch_response,
    encode_fetch_request,
    encode_fetch_response,
)
from .primitives import RequestHeader, decode_request_header
from .produce import (
    PRODUCE_VERSIONS,
    ProducedPartition,
    ProducePartition,
    ProduceRequestData,
    ProduceResponseData,
    decode_plain_produce_response,
    decode_produce_request,
    encode_produce_request,
    encode_produce_response,
    is_flexible_produce,
)

__all__ = [
    "ProtocolError",
    "RequestHeader",
    "decode_request_header",
    "PRODUCE_VERSIONS",
    "ProducePartition",
    "ProduceRequestData",
    "ProducedPartition",
    "ProduceResponseData",
    "encode_produce_request",
    "decode_produce_request",
    "encode_produce_response",
    "decode_plain_produce_response",
    "is_flexible_produce",
    "FETCH_VERSIONS",
    "FetchPosition",
    "FetchedPartition",
    "FetchResponseData",
    "encode_fetch_request",
    "encode_fetch_response",
    "decode_fetch_response",
]
