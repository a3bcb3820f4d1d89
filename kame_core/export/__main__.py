"""``python -m kame_core.export``: see :mod:`kame_core.export.cli`."""
import sys

from .cli import main

sys.exit(main())
