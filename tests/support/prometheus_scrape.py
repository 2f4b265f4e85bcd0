"""Reading the driver's Prometheus endpoint the way Prometheus does, with prometheus_client's
own parser, for the tests of the metrics a running job serves."""

from __future__ import annotations

import socket
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def free_port() -> int:
    """A loopback port nothing listens on now, for a metrics endpoint."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def scrape_text(port: int) -> str:
    """The exposition text at ``/metrics``, as a scraper receives it."""
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    """Every sample at ``/metrics``: ``{(name, sorted labels): value}``."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(scrape_text(port)) for s in family.samples}
