"""The command line: ``main`` is the ``profplug`` script and ``python -m profplug``."""

from __future__ import annotations

import sys


def main() -> int:
    """The CLI (``cli.main.main``), imported here so that a Ctrl-C while its libraries load
    (typer, click: a few tenths of a second) is one line and exit 130, not a traceback."""
    try:
        from profplug.cli.main import main as run
    except KeyboardInterrupt:
        print("profplug: interrupted", file=sys.stderr)
        return 130
    return run()
