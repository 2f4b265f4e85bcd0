"""``python -m mirror.engine.copier SOCKET``: one resident copier (:mod:`.server`)."""

import sys

from .server import main

sys.exit(main(sys.argv[1:]))
