"""kmirror installed the way users install it: built with ``python -m build`` from a copy of the
source tree (as a fresh clone has it) and the wheel installed with pip into a new virtual
environment, with a home directory that has no source tree in it, nor above it. Shared by the
wheel's tests and the tests of shipping kmirror to Spark workers (``kmirror pack``), through
the :func:`installed` fixture: built and installed once per run of the suite, whichever
pytest-xdist worker asks first (the others wait for it), since neither changes it.

Imported as ``installed_kmirror`` (tests/support/ is on ``sys.path``), and a pytest plugin of
tests/conftest.py for its fixture."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: no PYTHONPATH, no virtual environment of ours, no
    Spark driver options of the suite's (:mod:`spark_archive`)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "SPARK_SUBMIT_OPTS")}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


class Installed:
    def __init__(self, venv: Path, home: Path, wheel: Path, sdist: Path):
        self.venv, self.home, self.wheel, self.sdist = venv, home, wheel, sdist

    @property
    def kmirror(self) -> str:
        return str(self.venv / "bin" / "kmirror")

    def run(self, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
        """``args`` run in the home directory, with the shell's environment and ``env``."""
        return subprocess.run([*args], cwd=self.home, env=clean_env(**env), capture_output=True, text=True,
                              timeout=timeout)


LEFT_BY_BUILDS = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
                                        ".hypothesis")
"""What a fresh clone does not have. A stale ``*.egg-info`` matters: setuptools takes its
SOURCES.txt as the sdist's manifest, so an old build's file list would hide a broken one."""


def install_kmirror(base: Path) -> Installed:
    """Build kmirror's sdist and wheel under ``base`` and install the wheel into ``base/venv``
    (about half a minute, from pip's cache). ``--no-compile``: Python compiles what it imports
    anyway, and byte-compiling every file of the dependencies up front was half of pip's 16 CPU
    seconds."""
    clone = base / "clone"
    shutil.copytree(ROOT, clone, ignore=LEFT_BY_BUILDS)
    dist = base / "dist"
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(clone)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("kmirror-*.whl")
    (sdist,) = dist.glob("kmirror-*.tar.gz")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                          "--disable-pip-version-check", "--no-compile", str(wheel)],
                         capture_output=True, text=True, timeout=900, env=clean_env())
    assert pip.returncode == 0, pip.stdout + pip.stderr
    home = base / "home"
    home.mkdir()
    return Installed(venv, home, wheel, sdist)


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Installed:
    """kmirror built and installed once per run: the workers of one pytest-xdist run share a
    base temporary directory and a run id, and the first to ask builds under a lock."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:  # one process: nobody to share with
        return install_kmirror(tmp_path_factory.mktemp("installed"))
    base = tmp_path_factory.getbasetemp().parent / f"installed-{run}"
    base.mkdir(exist_ok=True)
    with open(base / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (base / "venv").exists() and (base / "ready").exists():
            (wheel,) = (base / "dist").glob("kmirror-*.whl")
            (sdist,) = (base / "dist").glob("kmirror-*.tar.gz")
            return Installed(base / "venv", base / "home", wheel, sdist)
        done = install_kmirror(base)
        (base / "ready").touch()
        return done
