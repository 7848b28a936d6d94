"""Commands about authority: `firm revoke`, and the grant options `firm run` takes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from firm.authority import scopes as sc
from firm.authority.grants import GrantError, GrantRequest
from firm.cli.common import (
    DbOption,
    JsonOption,
    console,
    err_console,
    open_existing,
    print_json,
    resolve_task_id,
)
from firm.errors import FirmError
from firm.org import OrgChart, load_org, top_agent

GrantOption = Annotated[
    list[str] | None,
    typer.Option(
        "--grant",
        help="Narrow the top agent's tools to these names or globs, e.g. 'crm.query' "
        "(repeatable) [default: all it holds].",
    ),
]
LimitOption = Annotated[
    list[str] | None,
    typer.Option(
        "--limit",
        help="A ceiling as NAME=NUMBER, e.g. max_rows=100 (repeatable).",
    ),
]
TtlOption = Annotated[
    float | None, typer.Option("--ttl", help="Seconds until the run's authority expires.")
]
BudgetOption = Annotated[
    int | None,
    typer.Option("--budget", help="Model tokens the whole run may spend.", min=0),
]


def grant_request(
    grant: list[str] | None, limit: list[str] | None, ttl: float | None, budget: int | None
) -> GrantRequest | None:
    """The grant request the run options ask for, or None when they ask for nothing."""
    if not grant and not limit and ttl is None and budget is None:
        return None
    limits: dict[str, Any] = {}
    for item in limit or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise FirmError(f"--limit {item!r}: write it as NAME=NUMBER, e.g. max_rows=100")
        try:
            limits[name.strip()] = float(value)
        except ValueError:
            raise FirmError(f"--limit {item!r}: {value!r} is not a number") from None
    try:
        return GrantRequest.build(
            tools=list(grant) if grant else None, limits=limits, ttl=ttl, budget_tokens=budget
        )
    except GrantError as exc:
        raise FirmError(f"--grant/--limit/--ttl/--budget: {exc}") from None


def revoke(
    task_id: Annotated[str, typer.Argument(help="The task whose authority to revoke.")],
    reason: Annotated[str, typer.Option(help="Why; logged and shown to the manager.")] = (
        "revoked by the user"
    ),
    db: DbOption = None,
    json_mode: JsonOption = False,
) -> None:
    """Revoke a task's authority and its whole subtree's. Open tasks there are cancelled;
    a session still running is denied every tool call (reason: revoked) and stops."""
    with open_existing(db) as firm:
        task_id = resolve_task_id(firm, task_id)
        revoked = firm.revoke(task_id, reason)
        if json_mode:
            print_json({"revoked": revoked})
        elif revoked:
            console.print(f"Revoked {len(revoked)} task(s): " + ", ".join(revoked))
        else:
            console.print(f"{task_id} was already revoked.")


def register(app: typer.Typer) -> None:
    app.command()(revoke)


def grant_warnings(org: OrgChart, to: str | None, request: GrantRequest | None) -> list[str]:
    """What a --grant means when it matches nothing the top agent holds, said before the run
    starts: a pattern that meets none of its tools ∪ can_grant adds nothing, and a grant left
    empty means no agent in the run may call a tool (they can still delegate and report)."""
    if request is None or request.tools is None:
        return []
    agent = top_agent(org, to)
    held = (*org.tools_of(agent.id), *agent.can_grant)
    shown = ", ".join(held) or "none"
    warnings = [
        f"--grant {pattern!r} matches no tool {agent.id} holds (tools ∪ can_grant: {shown}); "
        "it grants nothing"
        for pattern in request.tools
        if not sc.intersect((pattern,), held)
    ]
    if warnings and not sc.intersect(request.tools, held):
        warnings.append(
            f"this run may call no tools: {agent.id} and its reports can only delegate and "
            "report, and write no files"
        )
    return warnings


def warn_about_grant(org: OrgChart | Path, to: str | None, request: GrantRequest | None) -> None:
    if request is None or request.tools is None:
        return
    chart = org if isinstance(org, OrgChart) else load_org(org)
    for warning in grant_warnings(chart, to, request):
        err_console.print(f"[yellow]warning:[/] {warning}")
