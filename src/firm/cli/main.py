"""The `firm` command. Each group of commands lives in its own module and registers here."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import Annotated

import typer

import firm
from firm.cli import (
    approvals,
    audit,
    authority,
    humans,
    inspect,
    mcp,
    scale,
    serve,
    team,
    work,
)
from firm.cli.common import EXIT_INTERRUPTED, EXIT_USAGE, err_console
from firm.errors import FirmError, OrgChartError

app = typer.Typer(
    name="firm",
    help="Run an AI company you can watch: an org chart in YAML, a goal, durable delegation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        print(f"firm {firm.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Run an AI company you can watch: an org chart in YAML, a goal, durable delegation."""


work.register(app)
inspect.register(app)
scale.register(app)
authority.register(app)
audit.register(app)
serve.register(app)
team.register(app)
mcp.register(app)
approvals.register(app)
humans.register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point: user mistakes become one clear message and an exit code, never a traceback.

    Typer handles its own usage errors (exit 2); firm's errors are caught here.
    """
    try:
        app(args=argv, prog_name="firm")
    except KeyboardInterrupt:
        err_console.print("Interrupted.")
        sys.exit(EXIT_INTERRUPTED)
    except OrgChartError as exc:
        for problem in exc.problems:
            err_console.print(f"error: {problem}", markup=False, highlight=False)
        sys.exit(EXIT_USAGE)
    except FirmError as exc:
        err_console.print(f"error: {exc}", markup=False, highlight=False)
        sys.exit(EXIT_USAGE)


def entry() -> None:
    """The `firm` command (and `python -m firm`): main(), then a prompt exit.

    Once a command has returned, every store is closed and every worker thread has ended;
    what is left of the process is the interpreter's own teardown — freeing each module and
    object one by one, which after the office's web stack takes the better part of a second
    of CPU (seconds, on a busy machine). So the exit handlers still run (telemetry flushes,
    logging), the output is flushed, and the process ends there. A thread still working (one
    no command should leave) gets the ordinary, waiting exit instead.
    """
    try:
        main()
        code: int | str | None = 0
    except SystemExit as exc:
        code = exc.code
    if any(t.is_alive() and not t.daemon for t in threading.enumerate()
           if t is not threading.main_thread()):  # fmt: skip
        sys.exit(code)
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # A closed pipe: nothing more can reach the reader.
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code or 0)


if __name__ == "__main__":
    entry()
