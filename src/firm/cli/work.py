"""Commands that make the company work: demo, init, run, resume."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
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
    chart_and_goal,
    console,
    err_console,
    exit_code_for,
    print_json,
    report,
    run_summary,
    watch,
)
from firm.cli.options import (
    BrainOption,
    LanguageOption,
    MaxConcurrentOption,
    PriorityOption,
    ToOption,
    WorkspaceOption,
    brain_command,
    submission_options,
)
from firm.engine.company import Company
from firm.errors import FirmError
from firm.org import load_org
from firm.teams.run import cancel_leftovers

DEMO_GOAL = "Launch an AI note-taking app"


def demo_org_text() -> str:
    return resources.files("firm").joinpath("examples/demo.yaml").read_text(encoding="utf-8")


def _work(firm: Firm, root_ids: list[str], json_mode: bool, many: bool = False) -> None:
    """Watch the runs to the end and report; --json prints one object, or (many) a list."""
    try:
        roots = watch(firm, root_ids, json_mode=json_mode)
    except KeyboardInterrupt:
        firm.close()
        err_console.print(
            "[yellow]Interrupted.[/] Unfinished work is saved; "
            "`firm resume` continues where it stopped."
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    for root in roots:
        # A team's background tasks can outlive their run (the manager turn that started them
        # failed): nobody is left to wait for them, so they are not left to run on.
        cancel_leftovers(firm, root.id)
    if json_mode:
        summaries = [run_summary(firm, r.id) for r in roots]
        print_json(summaries if many else summaries[0])
    else:
        for root in roots:
            report(firm, root)
    code = exit_code_for(roots)
    firm.close()
    raise typer.Exit(code)


def run(
    org_file: OrgArgument,
    goal: GoalArgument = None,
    brain: BrainOption = "simulation",
    db: DbOption = None,
    workspace: WorkspaceOption = None,
    max_concurrent: MaxConcurrentOption = None,
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
    """Give the company a goal and watch it work, to the end."""
    org_file, goal = chart_and_goal("run", org_file, goal)
    request = grant_request(grant, limit, ttl, budget)
    org = load_org(org_file)
    warn_about_grant(org, to, request)
    options = submission_options(brain, brain_values)
    firm = Firm(db, max_concurrent=max_concurrent or org.max_concurrent)
    try:
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
    except FirmError:
        firm.close()
        raise
    if not json_mode:
        console.print(
            f"[bold]{org.company}[/] · goal {root.id} → {root.assignee} · store {firm.store.url}"
        )
    _work(firm, [root.id], json_mode)


def demo(
    db: DbOption = None,
    workspace: Annotated[
        Path | None, typer.Option(help="Where agents write files [default: ./workspace].")
    ] = None,
    sim_latency: Annotated[
        float | None,
        typer.Option(help="Seconds per turn, to watch it [default: 0.3; 2.5 with --office]."),
    ] = None,
    json_mode: JsonOption = False,
    office: Annotated[
        bool,
        typer.Option(
            "--office",
            help="Open the office (the web page) on the demo company, its goal already "
            "running at a pace a person can follow.",
        ),
    ] = False,
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="With --office: the port; 0 picks a free one.")
    ] = 8000,
) -> None:
    """Run the built-in company on a built-in goal with the simulation brain (no API key)."""
    from firm.org import parse_org

    if office:
        from firm.cli.serve import demo_office

        demo_office(db, workspace, 2.5 if sim_latency is None else sim_latency, port)
        return
    if sim_latency is None:
        sim_latency = 0.3

    text = demo_org_text()
    org = parse_org(text, "firm:examples/demo.yaml")
    firm = Firm(db, max_concurrent=org.max_concurrent)
    root = firm.submit(
        org,
        DEMO_GOAL,
        brain="simulation",
        brain_options=submission_options("simulation", {"sim_latency": sim_latency}),
        workspace=workspace,
        org_yaml=text,
    )
    if not json_mode:
        console.print(f"[bold]{org.company}[/] (the demo company) works on: {DEMO_GOAL}")
    _work(firm, [root.id], json_mode)


def init(
    directory: Annotated[Path, typer.Argument(help="Folder to create the company in.")],
    force: Annotated[bool, typer.Option(help="Overwrite an existing company.yaml.")] = False,
) -> None:
    """Write DIRECTORY/company.yaml, an example org chart to edit."""
    target = directory / "company.yaml"
    if target.exists() and not force:
        raise FirmError(f"{target} already exists (use --force to overwrite it)")
    directory.mkdir(parents=True, exist_ok=True)
    target.write_text(demo_org_text(), encoding="utf-8")
    console.print(
        f'Wrote {target}. Edit it, then:\n  firm run {target} "Launch an AI note-taking app"'
    )


def resume(
    db: DbOption = None,
    max_concurrent: Annotated[
        int | None,
        typer.Option(
            min=1, max=1024, help="Sessions at once [default: each org chart's max_concurrent]."
        ),
    ] = None,
    json_mode: JsonOption = False,
) -> None:
    """Continue every unfinished run in the store, where it stopped."""
    firm = Firm(db, max_concurrent=max_concurrent)
    roots = firm.store.open_run_ids()
    if not roots:
        firm.close()
        if json_mode:
            print_json([])
        else:
            console.print("Nothing to resume: every run in the store has ended.")
        raise typer.Exit(0)
    for root_id in roots:  # a brain missing its settings (a model, a key) says so now
        try:
            Company.from_run(firm.store.run(root_id)).close()
        except FirmError:
            firm.close()
            raise
    if not json_mode:
        console.print(f"Resuming {len(roots)} run(s): {', '.join(roots)}")
    _work(firm, roots, json_mode, many=True)


def register(app: typer.Typer) -> None:
    app.command()(demo)
    app.command()(init)
    brain_command(app, run)
    app.command()(resume)
