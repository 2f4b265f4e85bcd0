"""Reading a configuration: dotted keys from elsewhere (a MirrorMaker 2 file) at the bottom, a
TOML file over them, the command line's dotted keys over both, and the keys from before the
configuration had sections (``partitioning``, ``[source]``, ``[retry]``),
each still read at its place in a section. That map is made from the model (each field's
``flat`` name, else its own), so it cannot drift from it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator, Mapping

from pydantic import BaseModel, ValidationError

from .base import ConfigError
from .model import SECTIONS, MirrorConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = ["load_config", "FLAT_KEYS", "flat_key"]


def _flat_names(model: type[BaseModel]) -> Iterator[tuple[str, str]]:
    for name, field in model.model_fields.items():
        meta = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        yield str(meta.get("flat", name)), name


FLAT_KEYS: dict[str, str] = {flat: f"{section}.{name}" for section in SECTIONS
                             for flat, name in _flat_names(MirrorConfig.model_fields[section].annotation)}
"""Each top-level key from before the sections (a setting, or a table: ``source``, ``retry``,
``spark_conf``) → its dotted place now (``clusters.source``, ``limits.retry``)."""


def flat_key(key: str) -> str:
    """``key`` (dotted, as in a section) as it was written before the sections, which is what
    its flag is made from: ``clusters.source.tls.ca_file`` → ``source.tls.ca_file``."""
    for flat, nested in FLAT_KEYS.items():
        if key == nested or key.startswith(nested + "."):
            return flat + key[len(nested):]
    raise KeyError(key)


def _nested(dotted: str, value: Any) -> str:
    """A dotted key in the sections' layout, whichever layout it was given in. A section's name
    given a table (or with a key after it) is the section; ``delivery = "at-least-once"`` is
    the flat key of ``delivery.mode``."""
    head, _, rest = dotted.partition(".")
    if head in SECTIONS and (rest or isinstance(value, dict)):
        return dotted
    if head in FLAT_KEYS:
        return FLAT_KEYS[head] + ("." + rest if rest else "")
    return dotted  # unknown: the model names it


def _put(data: dict[str, Any], dotted: str, value: Any, *, merge: bool, given: dict[str, str], how: str) -> None:
    *parents, leaf = dotted.split(".")
    node = data
    for parent in parents:
        node = node.setdefault(parent, {})
        if not isinstance(node, dict):
            raise ConfigError(f"config error: {parent}: expected a table")
    if isinstance(value, dict) and isinstance(node.get(leaf), dict):
        if not merge:
            clash = sorted(set(node[leaf]) & set(value))
            if clash:
                twice = f"{dotted}.{clash[0]}"
                raise ConfigError(f"config error: {twice} is given twice ({given.get(twice)} and {how})")
        value = {**node[leaf], **value}
    elif leaf in node and not merge:
        raise ConfigError(f"config error: {dotted} is given twice ({given.get(dotted)} and {how})")
    node[leaf] = value
    given[dotted] = how
    for key in value if isinstance(value, dict) else ():
        given[f"{dotted}.{key}"] = how


def _sectioned(data: Mapping[str, Any]) -> dict[str, Any]:
    """A file's tables in the sections' layout, flat keys moved to their places."""
    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    for key, value in data.items():
        place = _nested(key, value)
        _put(out, place, value, merge=False, given=given, how=f"as {key}" if place != key else f"in [{key}]")
    return out


def _dotted(keys: Mapping[str, Any] | None, data: dict[str, Any]) -> dict[str, Any]:
    """``keys`` (dotted, sectioned or flat; None means "not given") put into ``data``."""
    for dotted, value in (keys or {}).items():
        if value is not None:
            _put(data, _nested(dotted, value), value, merge=True, given={}, how="")
    return data


def _layered(lower: dict[str, Any], upper: dict[str, Any]) -> dict[str, Any]:
    """``upper`` over ``lower``, table by table, each key ``upper`` gives winning. A secret's
    ``*_env`` twin wins over it too (and the other way): a file naming ``password_env`` for
    a password the MirrorMaker 2 file wrote in clear means "read it from there instead"."""
    out = dict(lower)
    for key, value in upper.items():
        below = out.get(key)
        out[key] = _layered(below, value) if isinstance(value, dict) and isinstance(below, dict) else value
        twin = key[:-len("_env")] if key.endswith("_env") else key + "_env"
        if twin not in upper:
            out.pop(twin, None)
    return out


def load_config(path: Path | None = None, overrides: Mapping[str, Any] | None = None, *,
                base: Mapping[str, Any] | None = None) -> MirrorConfig:
    """Read ``path`` (TOML), apply ``overrides`` (dotted keys, sectioned or flat; None means
    "not given"), validate.

    ``base`` (dotted keys, as ``overrides``) is the bottom layer: what ``--mirrormaker2-config``
    read from MirrorMaker 2's file. The file's keys win over it without a "given twice" error,
    table by table (:func:`_layered`), and the flags win over both.

    A table given as an override (``--spark-conf`` flags) adds to the file's table of that
    name, its keys winning, rather than replacing it.

    Raises :class:`ConfigError` with one line per problem.
    """
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = _sectioned(tomllib.loads(Path(path).read_text()))
        except OSError as exc:
            raise ConfigError(f"config error: cannot read {path}: {exc.strerror or exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config error: {path} is not valid TOML: {exc}") from exc
    data = _layered(_dotted(base, {}), _dotted(overrides, data))
    try:
        return MirrorConfig.model_validate(data)
    except ValidationError as exc:
        lines = [f"{'.'.join(map(str, err['loc'])) or '(top level)'}: {err['msg']}" for err in exc.errors()]
        source = f" in {path}" if path else ""
        raise ConfigError(f"config error{source}:\n  " + "\n  ".join(lines)) from None
