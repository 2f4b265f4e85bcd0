"""``kmirror demo``: fill one embedded cluster with mixed data, mirror it to another with Spark,
and prove the copy right with an independent client. See :mod:`mirror.demo.cli`."""
