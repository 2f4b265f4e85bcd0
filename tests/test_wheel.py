"""kmirror installed the way users install it: an sdist and a wheel built with ``python -m build``,
the wheel installed with pip into a new virtual environment in another directory, and the
installed ``kmirror`` run from there, with no source tree on ``sys.path``.

Issue 38: ``packages = ["kcodecs", "mirror"]`` installed only the top level of ``mirror/``, and
every test ran on an editable install, which reads the source tree and hid it. The wheel's
contents are checked against the source tree file by file, so a new subpackage or data file
that the build leaves out fails here.

One installation, shared with the shipping tests (``installed``: build and install take about half a minute, from pip's cache).
"""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

import pytest
from confluent_kafka import Producer

from mirror.broker.embedded import BrokerProcess
from mirror.kafka import KafkaClient, NewTopic

from librdkafka_reader import read_values

pytestmark = [pytest.mark.slow, pytest.mark.interop]

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"mirror": "mirror", "codecs": "kcodecs"}
"""Source directory -> the package it installs as."""


def _source_files() -> set[str]:
    """Every file the packages' directories hold, as the wheel names it: ``codecs/x.py`` is
    ``kcodecs/x.py`` (bytecode caches left out)."""
    files = set()
    for directory, package in PACKAGES.items():
        for path in (ROOT / directory).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.add(f"{package}/{path.relative_to(ROOT / directory).as_posix()}")
    return files


def test_the_wheel_holds_every_file_of_the_source_packages(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    missing = _source_files() - names
    assert not missing, f"the wheel leaves out {sorted(missing)}"
    # It holds the code and its metadata, not the tests or anything else of the checkout.
    tops = {name.split("/")[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"mirror", "kcodecs"}


def test_the_sdist_holds_every_file_of_the_source_packages(installed):
    with tarfile.open(installed.sdist) as archive:
        top = archive.getnames()[0].split("/")[0]
        names = {name.removeprefix(top + "/") for name in archive.getnames()}
    expected = {f"{directory}/{file.split('/', 1)[1]}" for file in _source_files()
                for directory, package in PACKAGES.items() if file.split("/", 1)[0] == package}
    missing = expected - names
    assert not missing, f"the sdist leaves out {sorted(missing)}"


def test_every_module_imports_from_the_installation(installed):
    script = (
        "import importlib, pkgutil, sys, mirror, kcodecs\n"
        "for package in (mirror, kcodecs):\n"
        "    assert package.__file__.startswith(sys.prefix), package.__file__\n"
        "    for module in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        loaded = importlib.import_module(module.name)\n"
        "        assert loaded.__file__.startswith(sys.prefix), loaded.__file__\n"
        "        print(module.name)\n"
    )
    done = installed.run(str(installed.venv / "bin" / "python"), "-c", script)
    assert done.returncode == 0, done.stderr
    imported = {line.replace(".", "/") for line in done.stdout.split()}
    modules = {file.removesuffix(".py").removesuffix("/__init__") for file in _source_files() if file.endswith(".py")}
    assert modules - {"mirror", "kcodecs"} <= imported


def test_kmirror_help_runs_from_the_installation(installed):
    done = installed.run(installed.kmirror, "--help")
    assert done.returncode == 0, done.stderr
    for command in ("run", "broker", "demo", "bench"):
        assert command in done.stdout


def test_installed_brokers_and_a_one_shot_mirror_between_them(installed):
    """``kmirror broker`` until its ready line, twice, and ``kmirror run --once`` between them,
    all from the installation; librdkafka wrote the source and reads the destination back."""
    command = (installed.kmirror,)
    src = BrokerProcess(installed.home / "src", kmirror=command, cwd=installed.home).start()
    dst = BrokerProcess(installed.home / "dst", kmirror=command, cwd=installed.home).start()
    try:
        with KafkaClient(src.bootstrap) as client:
            client.create_topics([NewTopic("installed", 2)])
        producer = Producer({"bootstrap.servers": src.bootstrap, "compression.type": "lz4", "linger.ms": 5})
        sent = {0: [], 1: []}
        for i in range(2000):
            value = b"record-%d" % i
            producer.produce("installed", value=value, partition=i % 2)
            sent[i % 2].append(value)
        assert producer.flush(30) == 0
        done = installed.run(installed.kmirror, "run", "--source", src.bootstrap, "--destination", dst.bootstrap,
                             "--topics", "installed", "--once", "--checkpoint", str(installed.home / "checkpoint"))
        assert done.returncode == 0, done.stderr
        assert read_values(dst.bootstrap, "installed", 2) == sent
    finally:
        for broker in (src, dst):
            assert broker.terminate() == 0
