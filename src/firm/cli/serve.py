"""`firm serve`: open the office — the engine, the API and the page — in one process."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from firm.cli.authority import BudgetOption, GrantOption, LimitOption, TtlOption, grant_request
from firm.cli.common import DbOption, OrgArgument, chart_path, console, err_console
from firm.cli.options import (
    BrainOption,
    MaxConcurrentOption,
    WorkspaceOption,
    brain_command,
    submission_options,
)

if TYPE_CHECKING:
    from firm.server import AccessPolicy, Office, OfficeServer


def serve(
    org_file: OrgArgument,
    brain: BrainOption = "simulation",
    db: DbOption = None,
    workspace: WorkspaceOption = None,
    max_concurrent: MaxConcurrentOption = None,
    grant: GrantOption = None,
    limit: LimitOption = None,
    ttl: TtlOption = None,
    budget: BudgetOption = None,
    host: Annotated[
        str,
        typer.Option(help="Address to listen on. Anything but loopback needs the token for reads."),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port; 0 picks a free one.")] = 8000,
    brain_values: dict[str, Any] | None = None,
) -> None:
    """Open the office: watch the company work in a browser, with the API behind it.

    The engine runs in this process on the same store as the other commands, so `firm run`
    in another terminal shows up here too. Prints the address and the access token
    (set FIRM_TOKEN to choose it); changes need the token.
    """
    # Imported here so that `firm run` and friends never load the web stack.
    from firm.server import AccessPolicy, Office, OfficeServer

    token = os.environ.get("FIRM_TOKEN") or None
    policy = AccessPolicy.for_host(host, token)
    office = Office(
        chart_path(org_file),
        db=db,
        brain=brain,
        brain_options=submission_options(brain, brain_values),
        grant=grant_request(grant, limit, ttl, budget),
        workspace=workspace,
        max_concurrent=max_concurrent,
        policy=policy,
    )
    try:
        server = OfficeServer(office, host, port)
    except BaseException:
        office.firm.close()
        raise
    serve_until_closed(office, server, policy, host)


def serve_until_closed(
    office: Office,
    server: OfficeServer,
    policy: AccessPolicy,
    host: str,
    notes: tuple[str, ...] = (),
) -> None:
    """Print where the office is, then serve until Ctrl-C or SIGTERM."""
    url = server.url

    def say(text: str) -> None:  # one line each, unwrapped, so addresses stay whole
        console.print(text, highlight=False, markup=False, soft_wrap=True)

    say(f"{office.org.company}'s office is open at {url}")
    if server.local_url != url:  # listening on every address: the name above is for others
        say(f"On this machine: {server.local_url}")
    say(f"Access token: {policy.token}")
    say(f"Open with the token: {url}/#token={policy.token}")
    say(f"API docs: {url}/docs · store {office.store.url}")
    if policy.reads_need_token:
        err_console.print(
            f"[yellow]Listening on {host or '0.0.0.0'}, beyond this machine:[/] "
            "every request needs the token.",
            highlight=False,
            soft_wrap=True,
        )
    for note in notes:
        say(note)
    console.print("Ctrl-C closes the office; unfinished work resumes next time.", style="dim")
    console.file.flush()
    previous = signal.getsignal(signal.SIGTERM)

    def _as_interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        # uvicorn handles SIGTERM itself while serving, then re-raises it: this makes that
        # last step a clean exit rather than the default abrupt termination.
        signal.signal(signal.SIGTERM, _as_interrupt)
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.socket.close()
    console.print("The office is closed.")


def demo_office(db: str | None, workspace: Path | None, sim_latency: float, port: int) -> None:
    """`firm demo --office`: the office on the demo company, its goal already running."""
    from firm.cli.work import DEMO_GOAL, demo_org_text
    from firm.server import AccessPolicy, Office, OfficeServer

    chart = Path(".firm") / "demo-company.yaml"
    chart.parent.mkdir(parents=True, exist_ok=True)
    chart.write_text(demo_org_text(), encoding="utf-8")
    policy = AccessPolicy.for_host("127.0.0.1", os.environ.get("FIRM_TOKEN") or None)
    office = Office(
        chart,
        db=db,
        brain="simulation",
        brain_options=submission_options("simulation", {"sim_latency": sim_latency}),
        workspace=workspace,
        policy=policy,
    )
    try:
        server = OfficeServer(office, "127.0.0.1", port)
        root = office.submit(DEMO_GOAL, to=None, priority="normal", language=None)
    except BaseException:
        office.firm.close()
        raise
    notes = (
        f"The demo company is working on \u201c{DEMO_GOAL}\u201d ({root.id}), "
        f"about {sim_latency:g}s a turn.",
        "Open the link with the token: the Office tab shows the floor in 3D (Plan for the "
        "floor plan); an arc flies for each task handed down and each result handed back; "
        "click a desk to open its task. Give the company another goal in the box at the top.",
    )
    serve_until_closed(office, server, policy, "127.0.0.1", notes)


def register(app: typer.Typer) -> None:
    brain_command(app, serve)
