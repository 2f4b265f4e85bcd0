"""The command line, the model and docs/configuration.md say the same thing: every setting of
the model is a flag with a help line and a documented key, and each flag sets its own key."""

from __future__ import annotations

import argparse
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel, SecretStr

from mirror.config import MirrorConfig, load_config
from mirror.options import OPTIONS, SECTIONS, add_arguments, overrides_from_args

REFERENCE = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()


def _types(annotation) -> list:
    """``annotation`` and every type inside it (``Optional``, ``Annotated``, ...)."""
    return [annotation, *(t for arg in typing.get_args(annotation) for t in _types(arg))]


def _settings(model: type[BaseModel], prefix: str = "") -> dict[str, object]:
    """Every leaf setting of the model by dotted key, secrets left out (never flags)."""
    found = {}
    for name, field in model.model_fields.items():
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
        assert option.section in SECTIONS, f"{option.key}: section {option.section!r}"


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.flag)
def test_every_flag_is_in_the_configuration_reference(option):
    """A destination cluster's security flag is documented as its source twin's."""
    flag = option.flag
    if option.key.startswith(("destination.tls.", "destination.sasl.")):
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
    assert (config.lease_s, config.retry.attempts, config.destination.request_timeout_s) == (12.0, 3, 9.0)
    assert config.source.sasl.username == "u" and config.source.tls is not None
    assert config.source.tls.check_hostname is False and config.coalesce_target_bytes == 2048
