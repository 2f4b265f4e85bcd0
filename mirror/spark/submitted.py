"""The application file ``spark-submit`` runs: ``kmirror`` itself, for platforms whose only door
to a cluster is ``spark-submit``. It takes ``kmirror``'s command line after the file::

    spark-submit --master spark://spark-master:7077 --deploy-mode client \\
        "$(kmirror submit-file)" run --config /etc/kmirror/eu-orders.toml

Under ``spark-submit`` the JVM is started first and runs this file in a Python process of its
own, so two things differ from ``kmirror run`` (:func:`~.session.spark_session` sees to them):
``spark-submit``'s ``--master`` is the master unless the configuration names one, and a
SIGTERM or SIGINT sent to ``spark-submit`` (the JVM) is handed to the driver, which stops
after the current micro-batch and exits 0, as ``kmirror run`` does. Exit codes are
``kmirror``'s: ``spark-submit`` exits with its Python application's.
"""

from __future__ import annotations

import sys

from mirror.cli import main

if __name__ == "__main__":
    sys.exit(main())
