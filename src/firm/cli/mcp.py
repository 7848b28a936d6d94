"""`firm mcp`: serve a company over the Model Context Protocol (stdio, or HTTP with --http)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from firm.cli.common import DbOption, err_console
from firm.cli.options import (
    BrainOption,
    MaxConcurrentOption,
    WorkspaceOption,
    brain_command,
    submission_options,
)
from firm.errors import FirmError


def mcp(
    org_file: Annotated[Path, typer.Argument(help="The org chart (YAML).", show_default=False)],
    brain: BrainOption = "simulation",
    db: DbOption = None,
    workspace: WorkspaceOption = None,
    max_concurrent: MaxConcurrentOption = None,
    http: Annotated[
        bool, typer.Option("--http", help="Serve streamable HTTP instead of stdio.")
    ] = False,
    host: Annotated[str, typer.Option(help="With --http: the address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=1, max=65535, help="With --http: the port to listen on.")
    ] = 8765,
    brain_values: dict[str, Any] | None = None,
) -> None:
    """Serve the company to MCP clients: give_goal, list_tasks, get_task, cancel_task,
    read_file. The engine works the goals in this process, on the same store as the CLI."""
    try:
        from firm.mcp.serve import CompanyService, build_server
    except ImportError as exc:
        raise FirmError(f"firm mcp needs the extra: pip install 'firm[mcp]' ({exc})") from None
    from firm.api import Firm
    from firm.org import load_org

    org = load_org(org_file)
    options = submission_options(brain, brain_values)
    firm = Firm(db, max_concurrent=max_concurrent or org.max_concurrent)
    service = CompanyService(
        firm, org, org_file, brain=brain, brain_options=options, workspace=workspace
    )
    server = build_server(service, host, port)
    firm.engine.start()
    where = f"http://{host}:{port}/mcp" if http else "stdio"
    err_console.print(
        f"firm mcp: {org.company} on {firm.store.safe_url}, serving MCP on {where}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    try:
        if http:
            server.run("streamable-http")
        else:
            server.run()
    finally:
        firm.close()


def register(app: typer.Typer) -> None:
    brain_command(app, mcp)
