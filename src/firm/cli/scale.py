"""Commands for running a company on many workers: db upgrade, worker, submit.

export FIRM_DB=postgresql://firm@db.internal/acme
firm db upgrade                                   # once, and after each firm upgrade
firm worker --max-concurrent 16                   # on each of N machines
firm submit acme/company.yaml "Launch an AI note-taking app" --json
"""

from __future__ import annotations

import logging
import threading
from typing import Annotated, Any

import typer

from firm.api import Firm
from firm.cli.authority import (
    BudgetOption,
    GrantOption,
    LimitOption,
    TtlOption,
    grant_request,
    warn_about_grant,
)
from firm.cli.common import (
    EXIT_INTERRUPTED,
    DbOption,
    GoalArgument,
    JsonOption,
    OrgArgument,
    _SignalAsInterrupt,
    chart_and_goal,
    console,
    err_console,
    print_json,
)
from firm.cli.options import (
    BrainOption,
    LanguageOption,
    PriorityOption,
    ToOption,
    WorkspaceOption,
    brain_command,
    submission_options,
)
from firm.engine import Engine
from firm.store import open_store

db_app = typer.Typer(
    name="db",
    help="Manage the store: its schema, its cap on running sessions.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@db_app.command("limit")
def db_limit(
    limit: Annotated[
        int | None,
        typer.Argument(min=1, help="Sessions running at once across every worker, at most."),
    ] = None,
    off: Annotated[bool, typer.Option("--off", help="Lift the cap.")] = False,
    db: DbOption = None,
    json_mode: JsonOption = False,
) -> None:
    """Show or set the store-wide cap on running sessions. Every engine on this store —
    `firm worker`s on any machine, `firm serve`, `firm run` — respects it; a worker's own
    --global-limit overrides it for that worker."""
    if limit is not None and off:
        raise typer.BadParameter("give a number or --off, not both")
    store = open_store(db)
    try:
        if limit is not None or off:
            store.set_max_running(None if off else limit)
        current = store.max_running()
    finally:
        store.close()
    if json_mode:
        print_json({"store": store.safe_url, "max_running": current})
    else:
        shown = "no cap" if current is None else f"at most {current} running sessions"
        console.print(f"{store.safe_url}: {shown}", soft_wrap=True, markup=False)


@db_app.command("upgrade")
def db_upgrade(db: DbOption = None, json_mode: JsonOption = False) -> None:
    """Create the schema or migrate it to this firm's version. Safe to run again, and at once
    from several machines (upgrades take turns)."""
    store = open_store(db, check_schema=False)
    try:
        before, after = store.upgrade_schema()
    finally:
        store.close()
    if json_mode:
        print_json({"store": store.safe_url, "from": before, "to": after})
    elif before == after:
        console.print(
            f"{store.safe_url}: already at schema revision {after}.", soft_wrap=True, markup=False
        )
    else:
        console.print(
            f"{store.safe_url}: schema revision {before or '(none)'} → {after}.",
            soft_wrap=True,
            markup=False,
        )


def worker(
    db: DbOption = None,
    max_concurrent: Annotated[
        int, typer.Option(min=1, max=1024, help="Sessions this worker runs at once.")
    ] = 4,
    global_limit: Annotated[
        int | None,
        typer.Option(
            min=1, help="Company-wide cap on running sessions, across all workers [default: none]."
        ),
    ] = None,
    lease_seconds: Annotated[
        float,
        typer.Option(
            min=1.0,
            help="How long a claimed task stays this worker's without a heartbeat; after that "
            "another worker takes it over.",
        ),
    ] = 30.0,
    heartbeat: Annotated[
        float, typer.Option(min=0.05, help="Seconds between the scheduler's safety-net looks.")
    ] = 1.0,
    worker_id: Annotated[
        str | None,
        typer.Option(help="This worker's name in the store [default: host:pid:random]."),
    ] = None,
    quiet: Annotated[bool, typer.Option(help="Print only warnings and errors.")] = False,
) -> None:
    """Work every open run in the store until stopped (Ctrl-C or SIGTERM hands running
    sessions back). Needs only the database: the store keeps each run's org chart and brain
    options; the company's tool modules must be importable here."""
    logging.basicConfig(
        level=logging.WARNING if quiet else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    store = open_store(db)
    engine = Engine(
        store,
        max_concurrent=max_concurrent,
        worker_id=worker_id,
        lease_seconds=lease_seconds,
        heartbeat=heartbeat,
        global_limit=global_limit,
    )
    cap = f", company-wide cap {global_limit}" if global_limit else ""
    err_console.print(
        f"worker {engine.worker_id} on {store.safe_url}: up to {max_concurrent} sessions{cap}, "
        f"lease {lease_seconds:g}s",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    forever = threading.Event()
    try:
        with _SignalAsInterrupt():
            engine.start()
            while not forever.wait(3600):
                pass
    except KeyboardInterrupt:
        err_console.print(f"worker {engine.worker_id}: stopping; handing running sessions back")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        engine.stop()
        store.close()
        err_console.print(
            f"worker {engine.worker_id}: {engine.claims} claims, {engine.empty_claims} found "
            f"nothing; woken {engine.signal_wakeups} times by other commits",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def submit(
    org_file: OrgArgument,
    goal: GoalArgument = None,
    brain: BrainOption = "simulation",
    db: DbOption = None,
    workspace: WorkspaceOption = None,
    to: ToOption = None,
    priority: PriorityOption = "normal",
    language: LanguageOption = None,
    grant: GrantOption = None,
    limit: LimitOption = None,
    ttl: TtlOption = None,
    budget: BudgetOption = None,
    json_mode: JsonOption = False,
    brain_values: dict[str, Any] | None = None,
) -> None:
    """Store a goal for the workers and return its root task id at once (nothing runs here).
    Takes the brain options `firm run` takes; they are stored with the run."""
    org_file, goal = chart_and_goal("submit", org_file, goal)
    request = grant_request(grant, limit, ttl, budget)
    warn_about_grant(org_file, to, request)
    options = submission_options(brain, brain_values)
    with Firm(db, max_concurrent=1) as firm:
        root = firm.submit(
            org_file,
            goal,
            to=to,
            brain=brain,
            brain_options=options,
            workspace=workspace,
            priority=priority,
            language=language,
            grant=request,
        )
        if json_mode:
            print_json(
                {
                    "id": root.id,
                    "status": str(root.status),
                    "assignee": root.assignee,
                    "store": firm.store.safe_url,
                }
            )
        else:
            console.print(
                f"{root.id} → {root.assignee}: submitted to {firm.store.safe_url}; "
                "a `firm worker` on this store will work it.",
                soft_wrap=True,
                markup=False,
            )


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
    app.command()(worker)
    brain_command(app, submit)
