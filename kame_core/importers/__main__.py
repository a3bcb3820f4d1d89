"""``python -m kame_core.importers``: see :mod:`kame_core.importers.cli`."""
import sys

from .cli import main

sys.exit(main())
