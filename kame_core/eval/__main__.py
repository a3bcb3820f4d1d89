"""Entry point of ``python -m kame_core.eval``."""
import sys

from .cli import main

sys.exit(main())
