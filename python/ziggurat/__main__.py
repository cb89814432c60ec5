"""``python -m ziggurat``: the ``ziggurat`` command (see ``ziggurat.cli``)."""

import sys

from ziggurat.cli import main

if __name__ == "__main__":
    sys.exit(main())
