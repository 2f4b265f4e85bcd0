"""What every section of the configuration shares: strict frozen models, the field metadata the
command line is made from, secrets that stay masked, and the one error type."""

from __future__ import annotations

import os
import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, PlainSerializer, SecretStr, SerializationInfo

from kcodecs import KMirrorError

__all__ = ["ConfigError", "Secret", "REVEAL_SECRETS", "Strict", "cli", "compiles", "secret_from_env"]


class ConfigError(KMirrorError):
    """Invalid configuration; the message names every bad field and why."""


def cli(metavar: str | None = None, *, group: str | None = None, flat: str | None = None) -> dict[str, str]:
    """A field's place on the command line (:mod:`mirror.options` makes its flag from it).

    ``metavar``: the placeholder for its value where its type does not say (a number is N,
    SECONDS or MS by its unit, a choice lists its values). ``group``: the ``--help`` heading it
    is listed under, when not its section's (a cluster's timeout is a limit, its TLS files
    security). ``flat``: its key before the configuration had sections, when not its name
    (``delivery.mode`` was ``delivery``); its flag is made from that key, so flags never changed."""
    meta = {"metavar": metavar, "group": group, "flat": flat}
    return {key: value for key, value in meta.items() if value is not None}


class Strict(BaseModel):
    """Unknown keys are errors (a typo is named, not ignored); a loaded configuration never changes."""

    model_config = ConfigDict(extra="forbid", frozen=True)


REVEAL_SECRETS = {"reveal_secrets": True}
"""Serialization context under which :data:`Secret` fields are written in clear: only for the
copy of the configuration the job hands its own reader in a private file."""


def _reveal_when_asked(value: SecretStr, info: SerializationInfo) -> str | SecretStr:
    return value.get_secret_value() if (info.context or {}).get("reveal_secrets") else value


Secret = Annotated[SecretStr, PlainSerializer(_reveal_when_asked, when_used="json")]
"""A password: masked in ``repr``, ``str``, logs and JSON, unless dumped with :data:`REVEAL_SECRETS`."""


def compiles(pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {pattern!r}: {exc}") from None


def secret_from_env(data: Any, field: str) -> Any:
    """Fill ``field`` from the environment variable named by ``<field>_env``, when the
    configuration is loaded (on the driver; the executors get the value with the config)."""
    if not isinstance(data, dict) or data.get(f"{field}_env") is None:
        return data
    data = dict(data)
    name = data.pop(f"{field}_env")
    if data.get(field) is not None:
        raise ValueError(f"give {field} or {field}_env, not both")
    if name not in os.environ:
        raise ValueError(f"environment variable {name} ({field}_env) is not set")
    data[field] = os.environ[name]
    return data
