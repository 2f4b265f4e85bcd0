"""``kmirror pack``: this kmirror and its dependencies packed into one relocatable archive, for
Spark clusters whose workers do not have kmirror (``kmirror run --ship-environment FILE``).

The archive is made by venv-pack from the virtual environment kmirror runs in, PySpark left
out (the cluster's Spark brings its own). The workers need the same Python version at the same
path as this environment's base interpreter, and the same platform (the C extensions are
built for it). Pack once and reuse the file across restarts; pack again after upgrading
kmirror (``kmirror run`` says when the archive is older than the installed kmirror).

Exit codes: 0 packed; 2 not a virtual environment, kmirror installed editable (``pip install
-e``: install it from its wheel to pack it), or the output exists (``--force`` replaces it).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from .exits import EXIT_UNUSABLE

__all__ = ["add_arguments", "run", "pack"]

log = logging.getLogger("kmirror")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", type=Path, default=Path("kmirror-env.tar.gz"), metavar="FILE",
                        help="the archive to write (default kmirror-env.tar.gz; .tar.gz, .tar.bz2, .tar or .zip)")
    parser.add_argument("--force", action="store_true", help="replace FILE if it exists")


def run(args: argparse.Namespace) -> int:
    from venv_pack.core import VenvPackException

    try:
        output = pack(args.output, force=args.force)
    except VenvPackException as exc:
        log.error("cannot pack %s: %s", sys.prefix, " ".join(str(exc).split()))
        return EXIT_UNUSABLE
    log.info("packed %s into %s (%.0f MB): ship it with 'kmirror run --ship-environment %s'", sys.prefix, output,
             output.stat().st_size / 1e6, output)
    return 0


def pack(output: Path, *, force: bool = False, prefix: str = sys.prefix) -> Path:
    """Pack the environment at ``prefix`` into ``output``, leaving out what the cluster brings.

    venv-pack refuses editable installs it can see (a ``.pth`` line naming a directory outside
    the environment), but not a modern ``pip install -e``, whose ``.pth`` imports a finder
    that points at the source tree: the archive would hold no kmirror, and work only where that
    tree is. So kmirror's own code must be inside the environment."""
    import venv_pack
    from venv_pack.core import VenvPackException

    from .spark.shipping import LEFT_OUT

    outside = _code_outside(prefix)
    if outside is not None:
        raise VenvPackException(f"kmirror's code is not in the environment but in {outside} (an editable install, "
                                f"pip install -e): install it from its wheel (python -m build; pip install dist/*.whl)")
    env = venv_pack.Env(prefix)
    for name in LEFT_OUT:
        env = env.exclude(f"lib/python*/site-packages/{name}/*").exclude(f"lib/python*/site-packages/{name}-*/*")
    log.info("packing %s (%d files; PySpark left out) into %s", prefix, len(env.files), output)
    return Path(env.pack(output=str(output), force=force))


def _code_outside(prefix: str) -> Path | None:
    """Where kmirror's code is, if not inside the environment at ``prefix`` (an editable
    install's source tree); None when it is."""
    import kcodecs
    import mirror

    for package in (mirror, kcodecs):
        where = Path(package.__file__).resolve()
        if not where.is_relative_to(Path(prefix).resolve()):
            return where.parent
    return None
