"""``python -m semidbm``: the ``semidbm`` command-line tool (see ``semidbm.cli``)."""

import sys

from .cli import main

sys.exit(main())
