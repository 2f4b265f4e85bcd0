"""The command line, the model and docs/configuration.md say the same thing: every setting of
the model is a flag with a help line and a documented key, and each flag sets its own key."""

from __future__ import annotations

import argparse
import re
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel, SecretStr

from mirror.config import MirrorConfig, load_config
from mirror.options import HEADINGS, OPTIONS, add_arguments, overrides_from_args

REFERENCE = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()


def _types(annotation) -> list:
    """``annotation`` and every type inside it (``Optional``, ``Annotated``, ...)."""
    return [annotation, *(t for arg in typing.get_args(annotation) for t in _types(arg))]


def _settings(model: type[BaseModel], prefix: str = "") -> dict[str, object]:
    """Every leaf setting of the model by dotted key, secrets left out (never flags)."""
    found = {}
    for name, field in model.model_fields.items():
        if isinstance(field.json_schema_extra, dict) and field.json_schema_extra.get("internal"):
            continue  # set by kmirror (clusters.flow_topics), documented but never a flag
        kinds = [t for t in _types(field.annotation) if isinstance(t, type)]
        inner = [t for t in kinds if issubclass(t, BaseModel)]
        secret = any(issubclass(t, SecretStr) for t in kinds)
        if inner:
            found.update(_settings(inner[0], prefix + name + "."))
        elif not secret:
            found[prefix + name] = field
    return found


def test_every_setting_has_one_flag_with_help_in_a_known_section():
    settings = _settings(MirrorConfig)
    by_key = {option.key: option for option in OPTIONS}
    assert sorted(by_key) == sorted(settings)
    assert len({option.flag for option in OPTIONS}) == len(OPTIONS)
    for option in OPTIONS:
        assert option.help.strip(), f"{option.flag} has no help"
        assert option.heading in HEADINGS, f"{option.key}: heading {option.heading!r}"


def _documented_tables() -> dict[str, set[str]]:
    """docs/configuration.md's keys by table: each ``## `[table]`...`` heading's table rows."""
    tables: dict[str, set[str]] = {}
    keys: set[str] = set()
    for line in REFERENCE.splitlines():
        if line.startswith("## "):
            keys = set()
            for table in re.findall(r"`\[([\w.]+)\]`", line):
                tables[table] = keys
        elif (row := re.match(r"\| `(\w+)` \|", line)):
            keys.add(row.group(1))
    return tables


def _leaves(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every key of the model, tables and secrets included."""
    found = []
    for name, field in model.model_fields.items():
        inner = [t for t in _types(field.annotation) if isinstance(t, type) and issubclass(t, BaseModel)]
        found.append(prefix + name)
        if inner:
            found.extend(_leaves(inner[0], prefix + name + "."))
    return found


@pytest.mark.parametrize("key", _leaves(MirrorConfig))
def test_every_key_is_documented_in_its_tables_reference(key):
    """A destination cluster's keys are documented with its source twin's."""
    tables = _documented_tables()
    table, _, name = key.replace("clusters.destination", "clusters.source").rpartition(".")
    if not table:  # a section: a table of its own
        assert name in tables, f"[{name}] has no section in docs/configuration.md"
    else:
        assert table in tables, f"[{table}] has no section in docs/configuration.md"
        assert name in tables[table], f"{key} is not in the [{table}] table of docs/configuration.md"


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.flag)
def test_every_flag_is_in_the_configuration_reference(option):
    """A destination cluster's security flag is documented as its source twin's."""
    flag = option.flag
    if option.key.startswith(("clusters.destination.tls.", "clusters.destination.sasl.")):
        flag = "--source-" + flag[len("--destination-"):]
    assert f"`{flag}" in REFERENCE, f"{option.flag} ({option.key}) is not in docs/configuration.md"


def _sample(option) -> tuple[list[str], object]:
    """A command line giving ``option`` a value, and the value its key must then hold."""
    arguments = option.arguments
    if arguments.get("action") == "store_true":
        return [option.flag], True
    if arguments.get("action") == "store_false":
        return [option.flag], False
    if arguments.get("action") == "append":
        return [option.flag, "k=v"], {"k": "v"}
    if "choices" in arguments:
        return [option.flag, arguments["choices"][-1]], arguments["choices"][-1]
    kind = arguments.get("type")
    if kind is int:
        return [option.flag, "7"], 7
    if kind is float:
        return [option.flag, "2.5"], 2.5
    if kind is Path:
        return [option.flag, "/tmp/x"], Path("/tmp/x")
    return [option.flag, "x7"], "x7"


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.flag)
def test_each_flag_sets_its_own_key_and_no_other(option):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    argv, value = _sample(option)
    overrides = overrides_from_args(parser.parse_args(argv))
    assert {key: v for key, v in overrides.items() if v is not None} == {option.key: value}


def test_a_command_line_of_flags_loads_into_the_model():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--source", "a:1", "--destination", "b:2", "--topics", "t", "--lease", "12",
                              "--retry-attempts", "3", "--destination-request-timeout", "9",
                              "--source-security-protocol", "SASL_SSL", "--source-sasl-mechanism", "PLAIN",
                              "--source-sasl-username", "u", "--source-sasl-password-env", "HOME",
                              "--source-tls-no-check-hostname", "--coalesce-target-bytes", "2048"])
    config = load_config(None, overrides_from_args(args))
    assert (config.streaming.lease_s, config.limits.retry.attempts,
            config.clusters.destination.request_timeout_s) == (12.0, 3, 9.0)
    assert config.clusters.source.sasl.username == "u" and config.clusters.source.tls is not None
    assert config.clusters.source.tls.check_hostname is False and config.routing.coalesce_target_bytes == 2048
