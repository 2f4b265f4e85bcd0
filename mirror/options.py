"""The command line of a mirror job, made from the configuration model: every setting of
:class:`~mirror.config.MirrorConfig` (and of its clusters, their security and the retries) is a
flag, with the field's description as its help, in the ``--help`` section its metadata names.
Nothing is described twice: a new field is a new flag, and tests/config/test_options.py holds
the flags, the help and docs/configuration.md to the model.

``kmirror run`` takes every option; ``kmirror groups translate`` takes the same ones, so the
job's own command line and ``--config`` file name its clusters and its job there too, and lists
those it uses (:func:`add_arguments`'s ``shown``).

How a field becomes a flag: its key from before the configuration had sections
(:func:`~mirror.config.flat_key`: ``sync.topic_configs_interval_s`` was
``sync_topic_configs_interval_s``), with ``_`` and ``.`` made ``-`` and a unit suffix ``_s``
dropped (``--sync-topic-configs-interval``), so no flag changed with the sections; a cluster's
``bootstrap`` is the cluster's own name (``--source``); a boolean that defaults to true is
turned off by ``--no-...``; a table of strings (``spark_conf``) is a repeatable ``KEY=VALUE``.
Secrets are never flags (their ``*_env`` twins name an environment variable instead), nor
tables of their own (``tls``, ``sasl``, ``retry``: their fields are).
"""

from __future__ import annotations

import argparse
import logging
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Literal, Mapping

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from .config import ConfigError, MirrorConfig, flat_key, load_config

__all__ = ["Option", "OPTIONS", "HEADINGS", "add_arguments", "config_from_args", "overrides_from_args"]

log = logging.getLogger("kmirror")

HEADINGS = {
    "clusters": "clusters and topics",
    "sync": "keeping the destination shaped like the source",
    "routing": "routing",
    "streaming": "streaming",
    "delivery": "delivery",
    "limits": "limits and retries",
    "takeover": "taking over from MirrorMaker 2",
    "security": "security (per cluster; see docs/configuration.md)",
}
"""The headings of ``--help``, in this order: a field is listed under its section's, or
the one its metadata names (``group``)."""


@dataclass(frozen=True)
class Option:
    """One flag: the configuration key it sets and how argparse reads it."""

    key: str
    """Dotted key of the field, as in ``--config`` (``clusters.source.sasl.mechanism``)."""
    flag: str
    heading: str
    help: str
    arguments: Mapping[str, Any]
    """argparse's keywords for it (type, metavar, choices, action)."""

    @property
    def dest(self) -> str:
        return self.key.replace(".", "__")


def _options(model: type[BaseModel], prefix: str = "", group: str | None = None) -> Iterator[Option]:
    """Every leaf setting under ``model``: a section's fields are listed under its heading, unless
    a field names another (a cluster's timeout is a limit, its TLS files security)."""
    for name, field in model.model_fields.items():
        key = prefix + name
        meta = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        heading = str(meta.get("group") or group or name)
        if meta.get("internal"):
            continue  # kmirror's to set (a flow's failback), never a flag
        inner = _model_of(field.annotation)
        if inner is not None:
            yield from _options(inner, key + ".", heading)
        elif not _is_secret(field.annotation):
            yield _option(key, field, heading)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (``ClusterConfig``, ``TlsConfig | None``), else None."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _is_secret(annotation: Any) -> bool:
    return any(isinstance(t, type) and issubclass(t, SecretStr) for t in (annotation, *_flat_args(annotation)))


def _flat_args(annotation: Any) -> Iterator[Any]:
    for arg in typing.get_args(annotation):
        yield arg
        yield from _flat_args(arg)


def _option(key: str, field: FieldInfo, heading: str) -> Option:
    meta = field.json_schema_extra or {}
    assert isinstance(meta, dict), key
    *tables, name = flat_key(key).split(".")
    flag_prefix = "".join(table.replace("_", "-") + "-" for table in tables)
    if name == "bootstrap":
        flag = "--" + flag_prefix.rstrip("-")
    else:
        base = name[:-2] if name.endswith("_s") else name
        flag = "--" + flag_prefix + base.replace("_", "-")
    annotation = _without_none(field.annotation)
    arguments: dict[str, Any] = {}
    if annotation is bool:
        if field.default is True:
            flag = "--" + flag_prefix + "no-" + flag[2 + len(flag_prefix):]
            arguments = {"action": "store_false", "default": None}
        else:
            arguments = {"action": "store_true", "default": None}
    elif typing.get_origin(annotation) is dict:
        arguments = {"action": "append", "metavar": meta.get("metavar", "KEY=VALUE")}
    elif typing.get_origin(annotation) is Literal:
        arguments = {"choices": typing.get_args(annotation)}
    else:
        arguments = {"metavar": meta.get("metavar") or _metavar(name, annotation)}
        kind = annotation if isinstance(annotation, type) else None
        if kind in (int, float):
            arguments["type"] = kind
        elif kind is not None and issubclass(kind, Path):
            arguments["type"] = Path
    negated = arguments.get("action") == "store_false"
    text = _help(field, negated)
    if tables and tables[0] in ("source", "destination"):
        text = f"{tables[0]}: {text}"
    return Option(key, flag, heading, text, arguments)


def _without_none(annotation: Any) -> Any:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return annotation


def _metavar(name: str, annotation: Any) -> str:
    if name.endswith("_ms"):
        return "MS"
    if name.endswith("_s"):
        return "SECONDS"
    if annotation in (int, float):
        return "N"
    return "VALUE"


def _help(field: FieldInfo, negated: bool) -> str:
    """The field's description, with its default where the description does not give it."""
    text = field.description or ""
    if negated:
        return f"turns off what is on by default: {text}"
    default = field.default
    if (default not in (None, PydanticUndefined) and field.default_factory is None
            and not isinstance(default, (bool, tuple)) and "default" not in text):
        text += f" (default {default})"
    return text


OPTIONS: tuple[Option, ...] = tuple(_options(MirrorConfig))
"""Every flag of a mirror job, in the model's order."""


def add_arguments(parser: argparse.ArgumentParser, *, shown: frozenset[str] | None = None,
                  help: Mapping[str, str] | None = None) -> None:
    """Every option, under its heading. With ``shown`` (dotted keys, a table's for all of its
    keys), the others are accepted but left out of ``--help``; ``help`` rewords some (by key)
    for a command that uses them otherwise."""
    groups = {heading: parser.add_argument_group(title) for heading, title in HEADINGS.items()}
    for option in OPTIONS:
        text = (help or {}).get(option.key, option.help)
        if shown is not None and not any(option.key == key or option.key.startswith(key + ".") for key in shown):
            text = argparse.SUPPRESS
        groups[option.heading].add_argument(option.flag, dest=option.dest, help=text, **option.arguments)
    parser.add_argument("--config", type=Path, metavar="FILE", help="TOML file with any of the settings above")


def config_from_args(args: argparse.Namespace, *, base: Mapping[str, Any] | None = None) -> MirrorConfig | None:
    """The job's configuration: ``base`` (a MirrorMaker 2 file's settings), the ``--config`` file
    over it, the flags over both; None after logging every problem, for the command to exit
    with :data:`~.exits.EXIT_UNUSABLE`."""
    try:
        return load_config(args.config, overrides_from_args(args), base=base)
    except (ConfigError, argparse.ArgumentTypeError) as exc:
        log.error("%s", exc)
        return None


def overrides_from_args(args: argparse.Namespace) -> dict[str, object]:
    """Command-line values as dotted config keys; flags not given are None and do not override."""
    overrides: dict[str, object] = {}
    for option in OPTIONS:
        value = getattr(args, option.dest)
        if option.arguments.get("action") == "append":
            value = _table(option.flag, value) if value else None
        overrides[option.key] = value
    return overrides


def _table(flag: str, items: list[str]) -> dict[str, str]:
    table = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"{flag} expects KEY=VALUE, got {item!r}")
        table[key] = value
    return table
