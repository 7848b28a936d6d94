"""`firm team run FILE`: a team of agents and a task list, from YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from firm.api import Firm
from firm.cli.common import (
    EXIT_DONE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    DbOption,
    JsonOption,
    console,
    err_console,
    print_json,
    report,
    watch,
)
from firm.errors import FirmError
from firm.teams.files import load_team
from firm.teams.run import (
    await_answers,
    cancel_leftovers,
    collect,
    finished_run,
    open_run,
    submit,
)
from firm.teams.verbose import event_printer

team_app = typer.Typer(
    help="Teams of agents with a task list (sequential or hierarchical), from YAML.",
    no_args_is_help=True,
)


def _inputs(pairs: list[str] | None) -> dict[str, str]:
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--input")
        out[key.strip()] = value
    return out


@team_app.command("run")
def run(
    team_file: Annotated[
        Path,
        typer.Argument(
            help="A team file (YAML), or a folder with agents.yaml and tasks.yaml.",
            show_default=False,
        ),
    ],
    input_: Annotated[
        list[str] | None,
        typer.Option("--input", "-i", help="KEY=VALUE for a {KEY} placeholder (repeatable)."),
    ] = None,
    process: Annotated[
        str | None, typer.Option(help="sequential or hierarchical [default: the file's].")
    ] = None,
    db: DbOption = None,
    workspace: Annotated[
        Path | None,
        typer.Option(help="Where agents write files [default: the file's, else ./workspace]."),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Print each manager decision.")
    ] = False,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            "--new",
            help="Run every task again in a new run, even if the store holds a finished or "
            "an unfinished run of this team.",
        ),
    ] = False,
    json_mode: JsonOption = False,
) -> None:
    """Run a team to the end. If the store holds a run of the same team (same files and
    inputs), nothing is redone: a finished run's outputs are shown at once, with no model
    call, and an unfinished one (its process was killed) is continued where it stopped.
    --fresh runs every task again."""
    overrides: dict[str, Any] = {}
    if process is not None:
        if process not in ("sequential", "hierarchical"):
            raise typer.BadParameter(
                f"{process!r} is not a process (sequential or hierarchical)", param_hint="--process"
            )
        overrides["process"] = process
    if workspace is not None:
        overrides["workspace"] = str(workspace)
    team = load_team(team_file, inputs=_inputs(input_), **overrides)
    spec = team.spec()
    firm = Firm(db)
    finished = False
    try:
        root_id = None if fresh else open_run(firm, spec)
        if root_id is not None:
            note = f"continuing {root_id}, left unfinished (--fresh starts afresh)"
        elif not fresh and (root_id := finished_run(firm, spec)) is not None:
            finished = True
            note = f"done earlier in {root_id}; its outputs stand (--fresh runs it again)"
        else:
            root_id = submit(firm, spec, workspace=team.workspace, llm=team.llm_options).id
            note = f"run {root_id}"
    except FirmError:
        firm.close()
        raise
    if not json_mode:
        console.print(
            f"[bold]{spec.name}[/] · {spec.process} · {len(spec.tasks)} task(s) · {note} · "
            f"store {firm.store.url}"
        )
    if finished:
        _show(firm, root_id, json_mode)
        return
    unsubscribe = None
    if verbose and not json_mode:
        unsubscribe = firm.store.subscribe(event_printer(spec, decisions_only=True))
    try:
        watch(firm, [root_id], json_mode=json_mode)
        while await_answers(firm, root_id):  # human_input: a person reviews an output
            watch(firm, [root_id], json_mode=json_mode)
    except KeyboardInterrupt:
        firm.close()
        err_console.print(
            "[yellow]Interrupted.[/] Unfinished work is saved; run the same command again "
            "(or `firm resume`) to continue where it stopped."
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        if unsubscribe is not None:
            unsubscribe()
    cancel_leftovers(firm, root_id)
    _show(firm, root_id, json_mode)


def _show(firm: Firm, root_id: str, json_mode: bool) -> None:
    """The run's outcome — the last task's output and each task's status — and the exit."""
    outcome = collect(firm, root_id)
    if json_mode:
        print_json(outcome.as_dict())
    else:
        report(firm, firm.task(root_id))
        statuses = ", ".join(f"{t.id} {outcome.task_status(t.id)}" for t in outcome.spec.tasks)
        console.print(f"[dim]Team tasks: {statuses}[/]")
    firm.close()
    raise typer.Exit(EXIT_DONE if outcome.done else EXIT_FAILED)


def register(app: typer.Typer) -> None:
    app.add_typer(team_app, name="team")
