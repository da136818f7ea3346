"""Entry point: builds the typer app from one module per subcommand, one error path."""

from __future__ import annotations

import sys

from profplug.analyzers.core.errors import ProfplugError, one_line
from profplug.cli import ab, compare, report, run, whatif
from profplug.cli.app import app


@app.callback()
def _root() -> None:
    """What torch.cuda.synchronize() costs pipeline-parallel inference, per rank."""


# Each module registers its command on `app` (cli/app.py) when imported.
_COMMANDS = (report, compare, whatif, run, ab)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user errors print one line on stderr and return a non-zero code."""
    try:
        app(args=argv, prog_name="profplug")  # standalone: exits through SystemExit
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except ProfplugError as exc:
        print(f"profplug: error: {one_line(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("profplug: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("profplug: error: out of memory (the inputs need more than this machine has; "
              "see docs/robustness.md for what a trace costs)", file=sys.stderr)
        return 3
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
