"""The module Spark starts as its Python worker daemon (``spark.python.daemon.module``, set by
:func:`mirror.spark.session.spark_settings`): PySpark's own daemon, with workers in quick-ACK
mode (:func:`~.pyspark_internals.serve_quick_ack_workers`)."""

from mirror.spark.pyspark_internals import serve_quick_ack_workers

if __name__ == "__main__":
    serve_quick_ack_workers()
