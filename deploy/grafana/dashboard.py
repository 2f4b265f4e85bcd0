"""Builds deploy/grafana/kmirror.json, kmirror's Grafana dashboard, with Grafana's own
grafana-foundation-sdk: ``python deploy/grafana/dashboard.py`` rewrites it (tests/test_deploy.py
holds the file to this script). Every query is in :data:`PANELS`, one place for the dashboard
and for the tests that evaluate them.

The metrics are docs/metrics.md's; a Prometheus data source is chosen when the dashboard is
imported (``${datasource}``)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from grafana_foundation_sdk.builders.dashboard import Dashboard, DatasourceVariable, Row
from grafana_foundation_sdk.builders.prometheus import Dataquery
from grafana_foundation_sdk.builders.timeseries import Panel as TimeSeries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

OUTPUT = Path(__file__).with_name("kmirror.json")
OUTAGE_KINDS = "ClusterUnreachableError|ConnectionFailedError"
"""Errors counted while an outage is waited out (docs/metrics.md)."""


@dataclass(frozen=True)
class PanelSpec:
    row: str
    title: str
    unit: str
    expr: str
    legend: str = ""
    description: str = ""


PANELS = (
    PanelSpec("Throughput", "Records/s per topic", "ops",
              'sum by (topic) (rate(kmirror_records_total{class!~"dropped|aborted"}[5m]))', "{{topic}}",
              "Source records copied per second, by source topic."),
    PanelSpec("Throughput", "MB/s", "MBs", "sum(rate(kmirror_bytes_total[5m])) / 1e6", "MB/s",
              "Source batch bytes copied per second."),
    PanelSpec("Lag", "Lag per topic", "short", "sum by (topic) (kmirror_partition_lag_offsets)", "{{topic}}",
              "Source offsets not copied yet, as the last micro-batch saw them."),
    PanelSpec("Lag", "Laggiest partitions", "short", "topk(10, kmirror_partition_lag_offsets)",
              "{{topic}}/{{partition}}", "The ten partitions furthest behind."),
    PanelSpec("Latency", "Replication latency p50", "s",
              "histogram_quantile(0.5, sum by (le) (rate(kmirror_replication_latency_seconds_bucket[5m])))", "p50",
              "From a record's source timestamp to its visibility at the destination (its commit, exactly-once)."),
    PanelSpec("Latency", "Replication latency p99", "s",
              "histogram_quantile(0.99, sum by (le) (rate(kmirror_replication_latency_seconds_bucket[5m])))", "p99"),
    PanelSpec("Latency", "Record age", "s", "max by (topic) (kmirror_record_age_seconds)", "{{topic}}",
              "Now minus the newest source timestamp copied: grows while the mirror stands still or the source is idle."),
    PanelSpec("Health", "Errors/min by kind", "short",
              f'sum by (kind) (increase(kmirror_errors_total{{kind!~"{OUTAGE_KINDS}"}}[1m]))', "{{kind}}",
              "Errors other than outages: each is worth reading in the job's log."),
    PanelSpec("Health", "Outage retries/min", "short",
              f'sum by (kind) (increase(kmirror_errors_total{{kind=~"{OUTAGE_KINDS}"}}[1m]))', "{{kind}}",
              "Retries while a cluster is unreachable: the job waits an outage out."),
    PanelSpec("Health", "Micro-batches/min", "short", "sum(increase(kmirror_micro_batches_total[1m]))",
              "micro-batches"),
    PanelSpec("Health", "Micro-batch duration p95", "s",
              "histogram_quantile(0.95, sum by (le) (rate(kmirror_micro_batch_duration_seconds_bucket[5m])))", "p95"),
    PanelSpec("Health", "Since the last micro-batch", "s",
              "time() - max(kmirror_last_micro_batch_timestamp_seconds > 0)", "seconds",
              "How long the job has not completed a micro-batch (none run while the source is idle)."),
)


def dashboard() -> dict:
    """The dashboard as Grafana's JSON model."""
    source = DataSourceRef(type_val="prometheus", uid="${datasource}")
    board = (Dashboard("kmirror").uid("kmirror").tags(["kafka", "kmirror"]).refresh("30s").time("now-6h", "now")
             .with_variable(DatasourceVariable("datasource").label("Prometheus").type("prometheus")))
    row = None
    for number, spec in enumerate(PANELS, start=1):
        if spec.row != row:
            row = spec.row
            board = board.with_row(Row(row).id(100 + number))
        panel = (TimeSeries().id(number).title(spec.title).unit(spec.unit).datasource(source)
                 .description(spec.description)
                 .with_target(Dataquery().ref_id("A").expr(spec.expr).legend_format(spec.legend).datasource(source)))
        board = board.with_panel(panel)
    return json.loads(json.dumps(board.build(), cls=JSONEncoder))


def rendered() -> str:
    return json.dumps(dashboard(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    OUTPUT.write_text(rendered())
    sys.exit(0)
