"""The CLI's typer app: each command's module (``cli/<name>.py``) registers its command on it,
and ``cli/main.py`` imports those modules and runs it. The app lives apart from ``main`` so
that the commands never import the module that imports them (``python -m profplug.cli.main``
runs ``main`` as ``__main__``: an app defined there would be a second one, with no commands).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

import typer

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

@dataclass(frozen=True)
class Invocation:
    """What ``cli.main.main`` was given: the app's context object (``ctx.obj``), passed to
    the app with each call, so that a command reads its own call's arguments."""

    argv: tuple[str, ...]


def command_line(ctx: typer.Context) -> str:
    """The command as it was given (a merged trace's metadata), quoted for a shell: the
    arguments of ``ctx``'s call through ``cli.main.main`` (none when the app was called
    another way)."""
    given = ctx.obj.argv if isinstance(ctx.obj, Invocation) else ()
    return shlex.join(["profplug", *given])
