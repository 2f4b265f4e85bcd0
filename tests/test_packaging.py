"""What `pip install kmirror` brings: everything `kmirror run` needs, Spark included."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PROJECT = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower() for requirement in requirements}


def test_the_plain_install_has_what_kmirror_run_imports():
    core = _names(PROJECT["dependencies"])
    # The Spark job, its Python data source (pyarrow and pandas through pyspark[sql]), the client.
    assert {"pyspark", "pandas", "kafka-python", "pydantic", "tenacity", "crc32c"} <= core
    assert any(r.startswith("pyspark[sql]") for r in PROJECT["dependencies"])


def test_the_old_spark_extra_still_installs():
    assert PROJECT["optional-dependencies"]["spark"] == []
