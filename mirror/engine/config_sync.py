"""Destination topic configs kept equal to their source's, as MirrorMaker 2 keeps them
(``sync.topic.configs.enabled``): at creation, then every ``sync.topic_configs_interval_s``.

What is copied follows MM2's incremental sync (``MirrorSourceConnector.targetConfig`` and
``incrementalAlterConfigs``, KIP-894): every config the source topic sets is set at the
destination; every config the source leaves at its default is deleted at the destination,
so that it falls back to the destination's default too. Read-only and sensitive configs,
those the source brokers' static files set (they describe those brokers, not the topic),
and the names in the exclude list are left alone. A destination value an operator changed
by hand is therefore overwritten, unless its name is excluded (as in MM2).

kmirror sends only what differs, so a steady mirror sends nothing and each change is logged
once: one line per topic per sync that changed it.

The default exclude list is :data:`mirror.config.DEFAULT_CONFIG_EXCLUDE`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from ..kafka import KafkaClient
from ..kafka.admin import ConfigOp, ConfigChange, ConfigEntry, ConfigSource, alter_topic_configs, \
    describe_topic_config_entries

__all__ = ["ConfigFilter", "creation_configs", "config_changes", "sync_topic_configs"]

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class ConfigFilter:
    """Which source configs a destination takes: all but read-only, sensitive and
    static-broker ones, and those whose names match ``exclude``."""

    exclude: tuple[str, ...]

    def copies(self, entry: ConfigEntry) -> bool:
        return not (entry.read_only or entry.sensitive or entry.source is ConfigSource.STATIC_BROKER_CONFIG
                    or any(re.fullmatch(pattern, entry.name) for pattern in self.exclude))


def creation_configs(source: Sequence[ConfigEntry], chosen: ConfigFilter) -> dict[str, str]:
    """The configs a new destination topic is created with: what the source topic sets."""
    return {e.name: e.value for e in source if not e.is_default and e.value is not None and chosen.copies(e)}


def config_changes(source: Sequence[ConfigEntry], destination: Sequence[ConfigEntry],
                   chosen: ConfigFilter) -> list[ConfigChange]:
    """What makes ``destination`` agree with ``source``. A config the destination's brokers do
    not know (a newer source) is left out rather than refused with the whole topic."""
    there = {e.name: e for e in destination}
    changes = []
    for entry in source:
        target = there.get(entry.name)
        if target is None or not chosen.copies(entry) or target.read_only:
            continue
        set_here = target.source is ConfigSource.DYNAMIC_TOPIC_CONFIG
        if entry.is_default:
            if set_here:
                changes.append(ConfigChange(entry.name, ConfigOp.DELETE))
        elif entry.value is not None and (not set_here or target.value != entry.value):
            changes.append(ConfigChange(entry.name, ConfigOp.SET, entry.value))
    return changes


def sync_topic_configs(source: KafkaClient, destination: KafkaClient, topics: Mapping[str, str],
                       chosen: ConfigFilter) -> dict[str, list[ConfigChange]]:
    """Bring each destination topic's configs (``topics``: source topic -> destination topic) to
    its source's; the changes made, per destination topic. A topic the destination refuses a
    change for is logged and left for the next sync, the others go on."""
    if not topics:
        return {}
    described = describe_topic_config_entries(source, sorted(topics))
    current = describe_topic_config_entries(destination, sorted(set(topics.values())))
    wanted = {topics[t]: changes for t, entries in described.items()
              if (changes := config_changes(entries, current.get(topics[t], []), chosen))}
    made = {}
    for topic, refusal in alter_topic_configs(destination, wanted).items():
        if refusal is not None:
            log.warning("topic configs of %s not synced: %s", topic, refusal)
            continue
        made[topic] = wanted[topic]
        log.info("synced topic configs of %s: %s", topic, _describe(wanted[topic], current.get(topic, [])))
    return made


def _describe(changes: Sequence[ConfigChange], before: Sequence[ConfigEntry]) -> str:
    was = {e.name: e.value for e in before}
    return ", ".join(f"{c.name}={c.value} (was {was.get(c.name)})" if c.op is ConfigOp.SET
                     else f"{c.name} back to default (was {was.get(c.name)})" for c in changes)
