"""A configuration written out as TOML, for ``kmirror run --print-config``: only what differs
from the defaults, secrets masked, and a file :func:`~mirror.config.load_config` reads back."""

from __future__ import annotations

from typing import Iterator

import tomli_w
from pydantic import BaseModel, SecretStr

from .model import MirrorConfig

__all__ = ["config_toml", "SECRET_MASK"]

SECRET_MASK = "**********"


def config_toml(config: MirrorConfig) -> str:
    """``config`` as TOML, only what differs from the defaults: what ``--print-config`` shows,
    and a file :func:`~mirror.config.load_config` reads back to the same configuration. Secrets
    are printed masked, a comment above each saying so and where the real one comes from."""
    text = tomli_w.dumps(config.model_dump(mode="json", exclude_defaults=True))
    secrets = set(_secret_keys(config))
    lines, table = [], ""
    for line in text.splitlines():
        if line.startswith("[") and line.endswith("]"):
            table = line.strip("[]")
        key = line.partition(" = ")[0]
        if (table, key) in secrets:
            lines.append(f"# {key}: masked ({SECRET_MASK}); the secret is the MirrorMaker 2 file's. Replace this "
                         f"line with {key}_env = \"VARIABLE\" (or the secret) before using this file")
        lines.append(line)
    return "\n".join(lines) + "\n"


def _secret_keys(model: BaseModel, table: str = "") -> Iterator[tuple[str, str]]:
    """``(table, key)`` of every secret that is set, tables dotted as TOML heads them."""
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, SecretStr):
            yield table, name
        elif isinstance(value, BaseModel):
            yield from _secret_keys(value, f"{table}.{name}" if table else name)
