"""What the protocol tests share: the client id they frame requests with, and small v2 batches
to carry as record sets."""

from __future__ import annotations

import random

import kcodecs
from kcodecs import Record

CLIENT_ID = "kmirror-test"


def batch(seed: int, n: int = 3) -> bytes:
    rnd = random.Random(seed)
    records = [Record(key=None, value=rnd.randbytes(rnd.randint(0, 60)), timestamp=1_700_000_000_000 + i) for i in range(n)]
    return kcodecs.build_batch(records, compression="none")
