"""Entry point of ``python -m kame_core.eval``."""
import os
import sys

from .cli import main

code = main()
# Every output is written and closed by now. Leave without the interpreter's teardown: a native library's
# thread pool (loaded with the models) aborts it now and then ("terminate called without an active exception",
# exit 134), which would turn a finished run into a failed one.
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
