"""Real Apache Kafka's jars, fetched from Maven Central by a pinned POM and cached outside the
checkout, for the tests and benchmarks that hold kmirror to real Kafka.

Each :class:`Distribution` names one POM beside this module, ``<name>-<version>.pom.xml``
(package data). The first
:meth:`Distribution.resolve` runs ``mvn dependency:copy-dependencies`` into
``<cache>/<name>-<version>/libs`` and writes ``complete`` last, so an interrupted download is
done again rather than half used; later calls only check for ``complete`` and need neither
Maven nor the network. ``<cache>`` is ``$KMIRROR_CACHE_DIR``, else ``$XDG_CACHE_HOME/kmirror``,
else ``~/.cache/kmirror``.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kcodecs import KMirrorError

__all__ = ["Distribution", "KAFKA_4", "KAFKA_3", "KAFKA_VERSIONS", "ToolchainError", "cache_dir",
           "toolchain_problem", "java_command"]

log = logging.getLogger(__name__)

POMS = Path(__file__).parent


class ToolchainError(KMirrorError):
    """Java or Maven is missing, or Maven could not resolve the jars: real Kafka cannot run here."""


@dataclass(frozen=True)
class Distribution:
    """One pinned set of jars: ``<name>-<version>.pom.xml`` and everything it depends on."""

    name: str
    version: str

    @property
    def pom(self) -> Path:
        return POMS / f"{self.name}-{self.version}.pom.xml"

    @property
    def label(self) -> str:
        return f"{self.name}-{self.version}"

    def cached(self, cache: Path | None = None) -> Path | None:
        """The classpath directory if a complete download is there, else None."""
        home = (cache or cache_dir()) / self.label
        return home / "libs" if (home / "complete").exists() else None

    def resolve(self, cache: Path | None = None) -> Path:
        """The directory holding every jar of this distribution (for ``java -cp 'DIR/*'``),
        downloaded on the first call. Raises :class:`ToolchainError` with Maven's own message
        when it cannot be had."""
        home = (cache or cache_dir()) / self.label
        home.mkdir(parents=True, exist_ok=True)
        with open(home / ".lock", "w") as lock:  # two processes resolving at once: one downloads
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (home / "complete").exists():
                return home / "libs"
            if shutil.which("mvn") is None:
                raise ToolchainError(f"cannot fetch {self.label}: Maven (mvn) is not on the PATH")
            libs = home / "libs"
            shutil.rmtree(libs, ignore_errors=True)
            log.info("fetching %s with Maven into %s (once; later runs use the cache)", self.label, libs)
            done = subprocess.run(
                ["mvn", "--batch-mode", "--quiet", "--file", str(self.pom), "dependency:copy-dependencies",
                 f"-DoutputDirectory={libs}"], capture_output=True, text=True)
            if done.returncode != 0:
                errors = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line]
                raise ToolchainError(f"mvn could not fetch {self.label}: " + (errors[0] if errors else done.stderr[-500:]))
            (home / "complete").write_text("\n".join(sorted(p.name for p in libs.iterdir())) + "\n")
            return libs


KAFKA_4 = Distribution("kafka", "4.4.0")
"""The newest Apache Kafka that Maven Central serves here."""
KAFKA_3 = Distribution("kafka", "3.9.2")
"""The last 3.x line, the most deployed."""
KAFKA_VERSIONS = {d.version: d for d in (KAFKA_4, KAFKA_3)}


def cache_dir() -> Path:
    if "KMIRROR_CACHE_DIR" in os.environ:
        return Path(os.environ["KMIRROR_CACHE_DIR"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "kmirror"


def java_command() -> str | None:
    """``$JAVA_HOME/bin/java``, else ``java`` on the PATH, else None."""
    if os.environ.get("JAVA_HOME") and (Path(os.environ["JAVA_HOME"]) / "bin" / "java").exists():
        return str(Path(os.environ["JAVA_HOME"]) / "bin" / "java")
    return shutil.which("java")


def toolchain_problem(distribution: Distribution = KAFKA_4) -> str | None:
    """Why real Kafka cannot run on this machine (no Java; no Maven and no cached jars), or None."""
    if java_command() is None:
        return "no Java: neither $JAVA_HOME/bin/java nor java on the PATH"
    if distribution.cached() is None and shutil.which("mvn") is None:
        return f"no Maven (mvn) on the PATH to fetch {distribution.label}, and no cached copy in {cache_dir()}"
    return None
