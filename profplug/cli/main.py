"""Entry point: builds the typer app from one module per subcommand, one error path."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from profplug.analyzers.core.errors import ProfplugError, one_line
from profplug.cli import ab, compare, report, run, whatif
from profplug.cli.app import Invocation, app


def _version(value: bool) -> None:
    if value:
        from profplug.analyzers.core.version import __version__

        print(f"profplug {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_version, help="Print the version and exit.")
] = False) -> None:
    """What torch.cuda.synchronize() costs pipeline-parallel inference, per rank."""


# Each module registers its command on `app` (cli/app.py) when imported.
_COMMANDS = (report, compare, whatif, run, ab)
# The click command typer makes of `app`, made once, now that every command is registered:
# calling `app(...)` makes it again on every call (typer reads each command's signature
# anew), the most of an in-process `main()` call on a small run. With
# pretty_exceptions_enable=False, typer's exception hook (which `app(...)` installs) prints
# what Python's own does.
_CLI = typer.main.get_command(app)


def _empty_argument(argv: list[str]) -> str | None:
    """The error for an empty argument ('') before ``--`` (a job's own arguments may be
    empty): typer would take it as the path ``.``, the current folder."""
    head = argv[: argv.index("--")] if "--" in argv else argv
    if "" in head:
        at = head.index("")
        after = f" after {head[at - 1]}" if at else ""
        return "an empty argument ('')" + after + ": give a path or a value"
    return None


def _from_ctrl_c(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt is among the causes of ``exc``."""
    seen: BaseException | None = exc
    for _ in range(8):
        seen = (seen.__cause__ or seen.__context__) if seen is not None else None
        if seen is None:
            return False
        if isinstance(seen, KeyboardInterrupt):
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user errors print one line on stderr and return a non-zero code."""
    given = sys.argv[1:] if argv is None else list(argv)
    empty = _empty_argument(given)
    if empty is not None:
        print(f"profplug: error: {empty}", file=sys.stderr)
        return 2
    try:
        # standalone: exits through SystemExit
        _CLI(args=argv, prog_name="profplug", obj=Invocation(tuple(given)))
    except SystemExit as exc:
        code = exc.code
        if code == 130 and _from_ctrl_c(exc):  # typer turns a Ctrl-C into a silent 130
            print("profplug: interrupted", file=sys.stderr)
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
