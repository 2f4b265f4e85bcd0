"""The workshop stays out of the product's path: ``kmirror run`` and ``kmirror groups`` load no
benchmark, demo, embedded-broker or real-Kafka module (they would cost start-up time and
memory on every executor host, and tie the product to code it does not need). Checked in a
fresh interpreter, through ``sys.modules``, after each command has parsed its arguments and
started (each stops at once on an unreachable cluster)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

WORKSHOP = ("mirror.bench", "mirror.demo", "mirror.broker", "mirror.realkafka")

_PROBE = """
import json, sys
from mirror.cli import main
code = main(sys.argv[1:])
print(json.dumps([code, sorted(sys.modules)]))
"""


def _loaded(tmp_path, *argv: str) -> tuple[int, list[str]]:
    once = tmp_path / "once.toml"
    once.write_text("[retry]\nattempts = 1\n")  # unreachable at the first try, not after 8
    done = subprocess.run([sys.executable, "-c", _PROBE, *argv, "--config", str(once)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    code, modules = json.loads(done.stdout.strip().splitlines()[-1])
    return code, modules


@pytest.mark.parametrize("argv", [
    ("run", "--source", "127.0.0.1:1", "--destination", "127.0.0.1:2", "--topics", "t", "--once"),
    ("groups", "translate", "--source", "127.0.0.1:1", "--destination", "127.0.0.1:2", "--topics", "t",
     "--groups", "g"),
], ids=["run", "groups"])
def test_product_commands_load_no_workshop_module(tmp_path, argv):
    code, modules = _loaded(tmp_path, *argv)
    assert code == 2  # the unreachable cluster, as an operator would see it
    assert "mirror.engine" in modules  # the probe saw the product's own modules load
    assert [m for m in modules if m.startswith(WORKSHOP)] == []


def test_the_help_lists_every_command_without_loading_them():
    done = subprocess.run([sys.executable, "-m", "mirror.cli", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    for command in ("run", "groups", "demo", "broker", "bench"):
        assert f"    {command}" in done.stdout
