"""Records written by Kafka's own Java producer (``JavaCopy.java``, run from source by ``java``
with the Kafka distribution's jars): a destination no code of kmirror's has touched."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterable, Sequence

from mirror.realkafka.distribution import java_command

_SOURCE = Path(__file__).with_name("JavaCopy.java")

Record = tuple[int, "bytes | None", "bytes | None", int, Sequence[tuple[str, "bytes | None"]]]
"""partition, key, value, timestamp (ms), headers."""


def _hex(data: bytes | None) -> str:
    return "-" if data is None else data.hex()


def java_produce(jars: Path, bootstrap: str, topic: str, records: Iterable[Record], *,
                 compression: str | None = None) -> None:
    """Every record written and acknowledged by Kafka's idempotent Java producer (its
    ``compression.type``: ``compression``, or none)."""
    lines = [f"{partition}\t{_hex(key)}\t{_hex(value)}\t{timestamp}\t"
             + ",".join(f"{name.encode().hex()}:{_hex(header)}" for name, header in headers or ())
             for partition, key, value, timestamp, headers in records]
    done = subprocess.run([java_command() or "java", "-cp", f"{jars}/*", str(_SOURCE), bootstrap, topic,
                           *([compression] if compression else [])],
                          input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
