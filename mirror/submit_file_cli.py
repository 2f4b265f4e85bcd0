"""``kmirror submit-file``: print the path of the application file ``spark-submit`` runs kmirror
from (:mod:`mirror.spark.submitted`), for ``spark-submit ... "$(kmirror submit-file)" run ...``."""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # no options


def run(args: argparse.Namespace) -> int:
    from .spark import submitted

    print(submitted.__file__)
    return 0
