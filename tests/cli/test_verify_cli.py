"""``kmirror verify``'s report and exit rules (no Spark needed): what fails a mirror in each
delivery mode, how an executor's error is named, and the tables an operator reads."""

from __future__ import annotations

from mirror.config import load_config
from mirror.spark.verify import Finding, PairReport, _task_error
from mirror.verify_cli import failures, report_text


def _config(mode: str):
    return load_config(None, {"source.bootstrap": "a:9092", "destination.bootstrap": "b:9092", "topics": "t",
                              "delivery": mode})


DUPLICATED = PairReport("t", "t", 10, 11, (Finding("duplicated", "t", 0, 1, 4),))
GONE = PairReport("u", "m.u", 8, 10, (Finding("gone", "m.u", 1, 2, 0),))


def test_duplicates_fail_exactly_once_only_and_gone_records_never_fail():
    assert failures([DUPLICATED, GONE], _config("exactly-once")) == [DUPLICATED.findings[0]]
    assert failures([DUPLICATED, GONE], _config("at-least-once")) == []


def test_the_report_says_each_pair_s_verdict_and_each_finding_s_first_offset():
    clean = PairReport("v", "v", 5, 5, ())
    text = report_text([clean, DUPLICATED, GONE]).splitlines()
    assert text[0].split() == ["PAIR", "SOURCE-RECORDS", "DESTINATION-RECORDS", "VERDICT"]
    assert text[1].split() == ["v", "->", "v", "5", "5", "exact"]
    assert text[2].split() == ["t", "->", "t", "10", "11", "duplicated", "1"]
    assert text[5].split()[:4] == ["KIND", "PARTITION", "RECORDS", "FIRST-OFFSET"]
    assert text[6].split()[:4] == ["duplicated", "t-0", "1", "4"]
    assert text[7].split()[:4] == ["gone", "m.u-1", "2", "0"] and "no longer at the source" in text[7]


def test_an_executors_error_is_named_by_its_class_for_the_exit_code():
    spark_said = Exception("An exception was thrown from the Python worker. Please see the stack trace below.\n"
                           "Traceback (most recent call last):\n  File \"/x/verify.py\", line 9, in _read_tasks\n"
                           "mirror.kafka.errors.ClusterUnreachableError: 127.0.0.1:1 refused 3 connections\n"
                           "\n\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.raiseWithTraceback(x)")
    error = _task_error(spark_said)
    assert (error.kind, str(error)) == ("ClusterUnreachableError",
                                        "ClusterUnreachableError: 127.0.0.1:1 refused 3 connections")
