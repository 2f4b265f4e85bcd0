"""Reading the driver's Prometheus endpoint the way Prometheus does, with prometheus_client's
own parser, for the tests of the metrics a running job serves."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    """Every sample at ``/metrics``: ``{(name, sorted labels): value}``."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}
