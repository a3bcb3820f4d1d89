"""Entry point of ``python -m kame_core.augment``."""
import sys

from .cli import main

sys.exit(main())
