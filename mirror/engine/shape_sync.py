"""The destination kept shaped like its source while the job runs: topic configs and topic ACLs,
at the start and every ``sync.topic_configs_interval_s`` (MirrorMaker 2's scheduled
``syncTopicConfigs`` and ``syncTopicAcls``). Partitions are not here: they are added before
the copy needs them (:mod:`.topics`).

Only topics kmirror created are synced, unless ``sync.existing_topics`` asks for the others
too: MirrorMaker 2 overwrites the configs of a topic it finds, and its users complain about
exactly that. :mod:`.topics` logs, once per topic, what it leaves alone.

A thread of the driver's, on a timer of its own: micro-batches come only when the source
has new records, and a config changed on an idle topic must still reach the destination
within an interval. It has clients of its own (a :class:`KafkaClient` serves one thread). A
sync that fails is logged and tried again at the next interval; the copy goes on, as MM2's
data flow does not wait for its syncs.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Mapping

from kcodecs import KMirrorError

from ..config import MirrorConfig
from ..kafka import KafkaClient
from .acl_sync import sync_topic_acls
from .clients import client_from
from .config_sync import ConfigFilter, sync_topic_configs
from .topics import TopicRoute

__all__ = ["ShapeSync"]

log = logging.getLogger(__name__)


class ShapeSync(threading.Thread):
    """One job's config and ACL syncs, every interval until :meth:`stop`, over the topics
    ``routes()`` names at the time."""

    def __init__(self, config: MirrorConfig, routes: Callable[[], Mapping[str, TopicRoute]]):
        super().__init__(name="kmirror-shape-sync", daemon=True)
        self._config = config
        self._routes = routes
        self._stopped = threading.Event()

    def run(self) -> None:
        config = self._config
        with client_from(config.clusters.source, config.limits.retry) as source, \
                client_from(config.clusters.destination, config.limits.retry) as destination:
            while not self._stopped.wait(config.sync.topic_configs_interval_s):
                self.sync(source, destination)

    def sync(self, source: KafkaClient, destination: KafkaClient) -> None:
        """Sync every mirrored topic's configs and ACLs once (each as enabled)."""
        config = self._config
        topics = {source_topic: route.topic for source_topic, route in self._routes().items()
                  if route.created or config.sync.existing_topics}
        if config.sync.topic_configs:
            self._attempt("topic configs", lambda: sync_topic_configs(
                source, destination, topics, ConfigFilter(config.sync.config_properties_exclude)))
        if config.sync.topic_acls:
            self._attempt("topic ACLs", lambda: sync_topic_acls(source, destination, topics))

    def stop(self) -> None:
        self._stopped.set()
        if self.is_alive():
            self.join(60)

    def _attempt(self, what: str, sync: Callable[[], object]) -> None:
        try:
            sync()
        except KMirrorError as exc:
            log.warning("syncing %s failed; the copy goes on and it is tried again in %.0f s: %s", what,
                        self._config.sync.topic_configs_interval_s, exc)
