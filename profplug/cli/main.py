"""Entry point: builds the typer app from one module per subcommand, one error path."""

from __future__ import annotations

import shlex
import sys

import typer

from profplug.analyzers.core.errors import ProfplugError, one_line

app = typer.Typer(
    name="profplug",
    help="What torch.cuda.synchronize() costs pipeline-parallel inference, per rank.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: typer's rich panels print "<bool>" after flags, and users then type
    # "--strict true" (read as a path) or "--no-report true" (read as the command).
    rich_markup_mode=None,
)


@app.callback()
def _root() -> None:
    """What torch.cuda.synchronize() costs pipeline-parallel inference, per rank."""


# Each module registers its command on `app` when imported.
_COMMANDS = ("report", "compare", "whatif", "run", "ab")


def _register() -> None:
    import importlib

    for name in _COMMANDS:
        importlib.import_module(f"profplug.cli.{name}")


_ARGV: list[str] = []  # the arguments of this run (``command_line``)


def command_line() -> str:
    """The command as it was given (a merged trace's metadata), quoted for a shell."""
    return shlex.join(["profplug", *_ARGV])


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user errors print one line on stderr and return a non-zero code."""
    _ARGV[:] = sys.argv[1:] if argv is None else list(argv)
    _register()
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
