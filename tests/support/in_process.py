"""``kmirror`` commands run in the test's own process, for tests whose subject is a command's
answer rather than its process: the command line is parsed and run by the same code as
``python -m mirror.cli``, but Spark is the test process's own session, started once per
pytest worker and shared (a ``kmirror verify`` in a process of its own starts a JVM: about 15 s
and 20 CPU seconds on the two cores). Tests of exit on signals, of logs as an operator reads
them, or of bad input before Spark starts, keep running ``python -m mirror.cli``.

Imported as ``in_process`` (tests/support/ is on ``sys.path``).
"""

from __future__ import annotations

import contextlib
import io
import subprocess


def kmirror(*argv: str) -> subprocess.CompletedProcess:
    """``kmirror ARGV`` run here: its exit code and what it printed (its log goes to pytest's
    capture, not to ``stderr``, which is left empty)."""
    from mirror.cli import build_parser

    args = build_parser(list(argv)).parse_args(list(argv))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = args.run(args)
    return subprocess.CompletedProcess(["kmirror", *argv], code, out.getvalue(), "")
