"""``python -m mirror.engine.copier SOCKET``: one resident copier (:mod:`.server`)."""

import sys

from .server import main

if __name__ == "__main__":  # importing the module (a check of every module) runs nothing
    sys.exit(main(sys.argv[1:]))
