"""The Spark session kmirror starts: its settings, and that the JVM runs with them."""

from __future__ import annotations

import pytest

from mirror.config import load_config
from mirror.spark.job import JVM_OPTIONS, spark_settings

_BASE = {"source.bootstrap": "127.0.0.1:9", "destination.bootstrap": "127.0.0.1:10", "topics": "t"}


def test_the_jvms_compile_with_c1_only_unless_spark_conf_says_otherwise():
    settings = spark_settings(load_config(None, _BASE))
    assert settings["spark.driver.extraJavaOptions"] == "-XX:TieredStopAtLevel=1"
    assert settings["spark.executor.extraJavaOptions"] == "-XX:TieredStopAtLevel=1"
    assert settings["spark.ui.enabled"] == "false"

    mine = spark_settings(load_config(None, {**_BASE, "spark_conf": {
        "spark.driver.extraJavaOptions": "-Dx=1", "spark.ui.enabled": "true", "spark.executor.memory": "2g"}}))
    assert mine["spark.driver.extraJavaOptions"] == "-Dx=1"  # replaced, not appended to
    assert mine["spark.executor.extraJavaOptions"] == JVM_OPTIONS
    assert mine["spark.ui.enabled"] == "true" and mine["spark.executor.memory"] == "2g"


@pytest.mark.slow
def test_the_driver_jvm_is_started_with_the_options(tmp_path):
    """The options must reach the JVM, so they must be set before the session starts it: read
    back from the running JVM's own arguments. (Every session of the test run is started by
    :func:`spark_session`, so a session an earlier test started has them too.)"""
    from mirror.spark.job import spark_session

    spark = spark_session(load_config(None, {**_BASE, "checkpoint": str(tmp_path / "ck")}))
    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert JVM_OPTIONS in arguments
    # Spark adds its own module options in front of the executors'.
    assert JVM_OPTIONS in spark.sparkContext.getConf().get("spark.executor.extraJavaOptions").split()
