"""The alert rules and the Grafana dashboard's queries under Prometheus's own engine, promtool
(issue 52), built from its Go module by ``./dev promtool`` once per machine.

- ``promtool check rules`` passes on deploy/prometheus/kmirror-rules.yml;
- ``promtool test rules`` passes tests/prometheus/kmirror-rules-test.yml, which has a unit test
  for every alert of the file;
- a live ``kmirror run`` (embedded brokers, a writer, then its destination broker stopped) is
  scraped once a second: ``promtool check metrics`` passes on a scrape, and every dashboard
  query, evaluated by promtool over the recorded series, returns the series a user expects
  (one per topic, per partition, one in all, or none), before and during the outage, and
  ``KmirrorOutage`` fires from the job's own error counters during it. The recording (a scrape
  a second) is replayed with each scrape standing for several seconds, so that the minutes the
  rules and panels look back over pass in a test of minutes: at most 10 s, and little enough
  that the longest pause between the job's outage retries (the driver's backoff, capped at
  15 s, plus the copy tasks' own retries, a second here) still falls well within the rule's
  5-minute window, as it does at any real scrape interval. The outage is recorded until, so
  replayed, it has lasted 12 minutes: the same in both tiers of the suite (the alert's 10
  minutes decide it), about a minute and a half of recording.

Every test here needs promtool, which takes Go minutes to build on a fresh machine: they are
``slow``, so that the quick tier builds nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from prometheus_scrape import free_port, scrape_text

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
"""The first test here builds promtool on a fresh machine: about 3 minutes alone, longer while
the other workers run Spark and Kafka (CI, 2026-12-02: past the suite's 300 s)."""

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "deploy" / "prometheus" / "kmirror-rules.yml"
RULE_TESTS = ROOT / "tests" / "prometheus" / "kmirror-rules-test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "kmirror.json"
OUTAGE_KINDS = {"ClusterUnreachableError", "ConnectionFailedError"}
"""The error kinds an outage is counted as (docs/metrics.md)."""


@pytest.fixture(scope="session")
def promtool() -> Path:
    """The pinned promtool, built by ``./dev promtool`` on first use; without Go, a skip (a
    failure under CI=true)."""
    if shutil.which("go") is None and not os.environ.get("KMIRROR_PROMTOOL"):
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("promtool needs Go to build it, and CI=true", pytrace=False)
        pytest.skip("promtool needs Go to build it")
    built = subprocess.run([str(ROOT / "dev"), "promtool", "--version"], capture_output=True, text=True, timeout=3600)
    assert built.returncode == 0, built.stderr[-3000:]
    cache = Path(os.environ.get("KMIRROR_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                 / "kmirror")
    (found,) = cache.glob("promtool-*/promtool")
    return found


def _promtool(promtool: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(promtool), *args], input=stdin, capture_output=True, text=True, timeout=300)


def test_the_rules_pass_promtools_check(promtool):
    checked = _promtool(promtool, "check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 6 rules found" in checked.stdout


def test_every_alert_has_a_unit_test_and_they_pass(promtool):
    alerts = {rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]}
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    firing = {case["alertname"] for test in tests for case in test.get("alert_rule_test", ()) if case["exp_alerts"]}
    assert firing == alerts
    ran = _promtool(promtool, "test", "rules", str(RULE_TESTS))
    assert ran.returncode == 0, ran.stdout + ran.stderr


# ---- a live job's scrapes ---------------------------------------------------------------------

NORMAL = 12
"""Scrapes recorded while both clusters run: over a minute and a half, replayed."""
MAX_OUTAGE = 400
"""Scrapes recorded at most while the destination is down."""


def _expected_panels(outage_kind: str | None) -> dict[str, list[dict[str, str]]]:
    """Each dashboard panel's series as a user expects them for one topic ``events`` of two
    partitions: per topic, per partition, one in all, or none."""
    topic = [{"topic": "events"}]
    return {
        "Records/s per topic": topic, "MB/s": [{}], "Lag per topic": topic,
        "Laggiest partitions": [{"topic": "events", "partition": "0"}, {"topic": "events", "partition": "1"}],
        "Replication latency p50": [{}], "Replication latency p99": [{}], "Record age": topic,
        "Errors/min by kind": [], "Outage retries/min": [{"kind": outage_kind}] if outage_kind else [],
        "Micro-batches/min": [{}], "Micro-batch duration p95": [{}], "Since the last micro-batch": [{}],
    }


def _samples(text: str) -> dict[str, float]:
    """``{'name{labels}': value}`` of one scrape, in promtool's series notation."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ", ".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}"] = sample.value
    return out


def _record(port: int, count: int) -> list[dict[str, float]]:
    scrapes = []
    for _ in range(count):
        scrapes.append(_samples(scrape_text(port)))
        time.sleep(1)
    return scrapes


def _record_outage(port: int) -> tuple[list[dict[str, float]], int]:
    """Scrapes while the destination is down, and the seconds each is to stand for: until the
    outage, replayed so, has shown rising errors for 12 minutes (the alert's 10 and some)."""
    scrapes: list[dict[str, float]] = []
    while len(scrapes) < MAX_OUTAGE:
        scrapes.append(_samples(scrape_text(port)))
        time.sleep(1)
        counts = [sum(v for k, v in scrape.items() if k.startswith("kmirror_errors_total{")) for scrape in scrapes]
        raised = [i for i in range(1, len(counts)) if counts[i] > counts[i - 1]]
        if len(raised) < 3:
            continue
        longest = max([b - a for a, b in zip(raised, raised[1:])] + [len(scrapes) - 1 - raised[-1]])
        step = max(1, min(10, 150 // longest))  # the longest pause within half the 5-minute window
        # From the second rise: an error counter born with the outage (no sample before its first
        # error) shows Prometheus no increase until it rises again.
        if (len(scrapes) - raised[1]) * step >= 12 * 60:
            return scrapes, step
    raise AssertionError(f"no 12 minutes of outage errors in {MAX_OUTAGE} scrapes: {counts}")


def _series(scrapes: list[dict[str, float]]) -> list[dict[str, str]]:
    names = sorted({name for scrape in scrapes for name in scrape})
    return [{"series": name, "values": " ".join(repr(float(s[name])) if name in s else "_" for s in scrapes)}
            for name in names]


def test_the_dashboard_and_the_outage_alert_over_a_live_jobs_scrapes(promtool, tmp_path):
    from live_source import Writer, wait_until

    from mirror.broker.embedded import BrokerProcess
    from mirror.kafka import KafkaClient, NewTopic

    src, dst = BrokerProcess(tmp_path / "src").start(), BrokerProcess(tmp_path / "dst").start()
    port = free_port()
    job = None
    try:
        with KafkaClient(src.bootstrap) as client:
            client.create_topics([NewTopic("events", 2)])
        with Writer(src.bootstrap, "events", 2, pause_s=0.1):
            job = subprocess.Popen([sys.executable, "-m", "mirror.cli", "run", "--source", src.bootstrap,
                                    "--destination", dst.bootstrap, "--topics", "events", "--name", "scraped",
                                    "--checkpoint", str(tmp_path / "ck"), "--master", "local[2]",
                                    "--trigger-interval", "1", "--metrics-port", str(port),
                                    # A try at the unreachable destination fails within a second
                                    # (the default, 8 tries, takes ~12 s): errors rise about every
                                    # 16 s, so a scrape can stand for 9 s and the outage's 12
                                    # minutes take 80 s to record.
                                    "--retry-attempts", "3", "--retry-max-backoff", "0.5"],
                                   stdout=subprocess.DEVNULL, stderr=(tmp_path / "job.log").open("w"))
            wait_until(lambda: _answers(port) and _samples(scrape_text(port)).get("kmirror_micro_batches_total{}", 0) >= 2,
                       "two micro-batches", 240, poll_s=1)
            raw = scrape_text(port)
            scrapes = _record(port, NORMAL)
            dst.terminate()
            outage, step = _record_outage(port)
            scrapes += outage
    finally:
        if job is not None:
            job.send_signal(signal.SIGTERM)
            job.wait(120)
        src.terminate()
        dst.terminate()

    assert _samples(raw)["kmirror_copiers{}"] == 2  # local[2]: two copy tasks, each a resident copier
    checked = _promtool(promtool, "check", "metrics", stdin=raw)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    outage_kinds = {name.split('kind="')[1].split('"')[0] for name in scrapes[-1]
                    if name.startswith("kmirror_errors_total{") and scrapes[-1][name] > scrapes[NORMAL].get(name, 0)}
    assert outage_kinds and outage_kinds <= OUTAGE_KINDS, (outage_kinds, (tmp_path / "job.log").read_text()[-5000:])
    (outage_kind,) = outage_kinds  # one kind for a destination that is down
    normal_end, outage_end = f"{(NORMAL - 1) * step}s", f"{(len(scrapes) - 1) * step}s"

    board = json.loads(DASHBOARD.read_text())
    queries = {panel["title"]: target["expr"] for panel in board["panels"] for target in panel.get("targets", ())}

    def panels(at: str, kind: str | None) -> list[dict]:
        expected = _expected_panels(kind)
        assert set(expected) == set(queries)
        # "!= bool -1" keeps every series the query returns, labels and all, as 1 (NaN too).
        return [{"expr": f"({expr}) != bool -1", "eval_time": at,
                 "exp_samples": [{"labels": "{" + ", ".join(f'{k}="{v}"' for k, v in labels.items()) + "}",
                                  "value": 1} for labels in expected[title]]}
                for title, expr in queries.items()]

    test = {"rule_files": [str(RULES)], "evaluation_interval": f"{step}s", "tests": [{
        "interval": f"{step}s", "input_series": _series(scrapes),
        "promql_expr_test": panels(normal_end, None) + panels(outage_end, outage_kind),
        "alert_rule_test": [
            {"eval_time": normal_end, "alertname": "KmirrorOutage", "exp_alerts": []},
            {"eval_time": outage_end, "alertname": "KmirrorOutage", "exp_alerts": [{
                "exp_labels": {"severity": "warning"},
                "exp_annotations": {"summary": "kmirror has been waiting out an unreachable cluster for over 10 minutes"},
            }]},
        ]}]}
    path = tmp_path / "scraped-test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    ran = _promtool(promtool, "test", "rules", str(path))
    assert ran.returncode == 0, ran.stdout[-6000:] + ran.stderr[-2000:]


def _answers(port: int) -> bool:
    try:
        scrape_text(port)
        return True
    except OSError:
        return False
