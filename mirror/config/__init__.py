"""The mirror's configuration: one pydantic model in sections, loaded from TOML, overridden from
the command line.

Everything is validated before Spark starts, so a typo costs a one-line message naming the
field (``config error: clusters.source.bootstrap: ...``) rather than a JVM stack trace minutes
later. See ``docs/configuration.md`` for the reference; the field docs here are its source.

- :mod:`.base`: what every section shares (strict models, command-line metadata, secrets);
- :mod:`.clusters`: ``[clusters]``, the two clusters and the topics mirrored;
- :mod:`.sections`: ``[sync]``, ``[routing]``, ``[streaming]``, ``[delivery]``, ``[limits]``;
- :mod:`.model`: :class:`MirrorConfig`, the sections together;
- :mod:`.loading`: :func:`load_config`, and the keys from before the sections;
- :mod:`.printing`: :func:`config_toml`, a configuration as TOML (``--print-config``);
- :mod:`.java_regex`: Java's regular expressions as Python's, where exact;
- :mod:`.mirrormaker2`: :func:`read_mirrormaker2`, a MirrorMaker 2 file as settings of one job.
"""

from .base import REVEAL_SECRETS, ConfigError
from .clusters import ClusterConfig, Clusters, SaslConfig, TlsConfig
from .loading import FLAT_KEYS, flat_key, load_config
from .mirrormaker2 import Mm2Key, Mm2Mapping, read_mirrormaker2
from .printing import config_toml
from .model import SECTIONS, MirrorConfig
from .sections import (DEFAULT_CONFIG_EXCLUDE, FETCH_MAX_BYTES, ONCE_MAX_OUTAGE_S, Delivery, Limits, RetryConfig,
                       Routing, Streaming, Sync, Takeover)

__all__ = ["ClusterConfig", "Clusters", "TlsConfig", "SaslConfig", "RetryConfig", "Sync", "Routing", "Streaming",
           "Delivery", "Limits", "Takeover", "MirrorConfig", "SECTIONS", "ConfigError", "load_config", "FLAT_KEYS", "flat_key",
           "ONCE_MAX_OUTAGE_S", "FETCH_MAX_BYTES", "REVEAL_SECRETS", "DEFAULT_CONFIG_EXCLUDE", "Mm2Key", "Mm2Mapping",
           "read_mirrormaker2", "config_toml"]
