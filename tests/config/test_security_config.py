"""Per-cluster security settings: TOML tables and flags, passwords from the file or the
environment, every inconsistency a one-line config error, and no password in any repr, dump,
error or ``--help``."""

from __future__ import annotations

import argparse
import pickle

import pytest
from pydantic import SecretStr

from mirror.config import REVEAL_SECRETS, ConfigError, MirrorConfig, load_config
from mirror.options import add_arguments, overrides_from_args

SECRET = "pw-8d2e-config-test"
BASE = {"source.bootstrap": "a:1", "destination.bootstrap": "b:1", "topics": "t"}


def _toml(tmp_path, text: str):
    path = tmp_path / "mirror.toml"
    path.write_text('topics = "t"\n' + text)
    return path


def test_sasl_ssl_from_toml_with_the_password_in_the_file(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    config = load_config(_toml(tmp_path, f"""
[source]
bootstrap = "a:1"
security_protocol = "SASL_SSL"
[source.tls]
ca_file = "{ca}"
[source.sasl]
mechanism = "SCRAM-SHA-512"
username = "mirror"
password = "{SECRET}"
[destination]
bootstrap = "b:1"
"""))
    security = config.clusters.source.security()
    assert security.protocol == "SASL_SSL" and security.tls.ca_file == ca and security.tls.check_hostname
    assert security.sasl.password.get_secret_value() == SECRET and security.sasl.username == "mirror"
    assert config.clusters.destination.security().protocol == "PLAINTEXT"
    # Masked everywhere but in the dump the job hands its own reader.
    assert SECRET not in repr(config) + str(config) + config.model_dump_json() + repr(security)
    revealed = config.model_dump_json(context=REVEAL_SECRETS)
    assert SECRET in revealed and MirrorConfig.model_validate_json(revealed) == config
    assert pickle.loads(pickle.dumps(config)) == config  # what Spark ships to executors


def test_password_env_is_read_when_the_configuration_is_loaded(monkeypatch):
    monkeypatch.setenv("KMIRROR_DST_PASSWORD", SECRET)
    overrides = {**BASE, "destination.security_protocol": "SASL_PLAINTEXT", "destination.sasl.mechanism": "PLAIN",
                 "destination.sasl.username": "u", "destination.sasl.password_env": "KMIRROR_DST_PASSWORD"}
    config = load_config(None, overrides)
    assert config.clusters.destination.sasl.password == SecretStr(SECRET)
    assert config.clusters.source.security().protocol == "PLAINTEXT"
    monkeypatch.delenv("KMIRROR_DST_PASSWORD")
    with pytest.raises(ConfigError, match=r"destination.sasl: Value error, environment variable "
                                          r"KMIRROR_DST_PASSWORD \(password_env\) is not set"):
        load_config(None, overrides)


@pytest.mark.parametrize(("overrides", "message"), [
    ({"source.security_protocol": "SASL_SSL"}, "source: Value error, security_protocol SASL_SSL needs a sasl table"),
    ({"source.sasl.mechanism": "PLAIN", "source.sasl.username": "u", "source.sasl.password": SECRET},
     "sasl is set but security_protocol is PLAINTEXT"),
    ({"source.security_protocol": "SASL_PLAINTEXT", "source.tls.check_hostname": False,
      "source.sasl.mechanism": "PLAIN", "source.sasl.username": "u", "source.sasl.password": SECRET},
     "tls is set but security_protocol is SASL_PLAINTEXT"),
    ({"source.security_protocol": "SASL_SSL", "source.sasl.mechanism": "GSSAPI", "source.sasl.username": "u",
      "source.sasl.password": SECRET}, "source.sasl.mechanism: Input should be 'PLAIN'"),
    ({"source.security_protocol": "SASL_SSL", "source.sasl.mechanism": "PLAIN", "source.sasl.username": "u"},
     "password or password_env is required"),
    ({"source.security_protocol": "SASL_SSL", "source.sasl.mechanism": "PLAIN", "source.sasl.username": "u",
      "source.sasl.password": SECRET, "source.sasl.password_env": "HOME"}, "give password or password_env, not both"),
    ({"source.security_protocol": "SSL", "source.tls.ca_file": "/nonexistent/ca.pem"},
     "source.tls.ca_file: Path does not point to a file"),
    ({"source.security_protocol": "TLS"}, "source.security_protocol: Input should be 'PLAINTEXT'"),
])
def test_inconsistent_security_settings_are_one_line_errors_without_the_password(overrides, message):
    with pytest.raises(ConfigError) as raised:
        load_config(None, {**BASE, **overrides})
    assert message in str(raised.value) and SECRET not in str(raised.value)


def test_security_flags_set_each_cluster_and_help_shows_no_password(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("SRC_PW", SECRET)
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    parser = argparse.ArgumentParser(prog="kmirror run")
    add_arguments(parser)
    args = parser.parse_args(["--source", "a:1", "--destination", "b:1", "--topics", "t",
                              "--source-security-protocol", "SASL_SSL", "--source-sasl-mechanism", "SCRAM-SHA-256",
                              "--source-sasl-username", "u", "--source-sasl-password-env", "SRC_PW",
                              "--source-tls-ca-file", str(ca), "--destination-security-protocol", "SSL"])
    config = load_config(None, overrides_from_args(args))
    assert config.clusters.source.security().sasl.password.get_secret_value() == SECRET
    assert config.clusters.source.tls.ca_file == ca and config.clusters.destination.security().protocol == "SSL"
    parser.print_help()
    assert SECRET not in capsys.readouterr().out
    assert not any("password" in option and "env" not in option for option in parser._option_string_actions)
