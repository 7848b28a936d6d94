"""Commands for people in the chain of command: list waiting calls, approve, deny."""

from __future__ import annotations

import getpass
import json
import time
from typing import Annotated

import typer
from rich.markup import escape

from firm.cli.common import DbOption, JsonOption, console, open_existing, print_json
from firm.errors import FirmError
from firm.store.approvals import APPROVED, DENIED, NOTE_MAX, PENDING, Approval
from firm.store.plans import is_plan, plan_items


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        raise FirmError("cannot tell who you are (no user name); set the USER variable") from None


def approvals(
    all_: Annotated[
        bool, typer.Option("--all", help="Decided ones too, not only those waiting.")
    ] = False,
    db: DbOption = None,
    json_mode: JsonOption = False,
) -> None:
    """List the tool calls and plans (a turn's delegations) waiting for a person's decision."""
    with open_existing(db) as firm:
        items = firm.store.approvals(status=None if all_ else PENDING)
    if json_mode:
        print_json([a.to_dict() for a in items])
        return
    if not items:
        console.print("Nothing waits for a decision." if not all_ else "No approvals yet.")
        return
    for a in items:
        console.print(_line(a))


def _line(a: Approval) -> str:
    args = escape(json.dumps(a.args, ensure_ascii=False, sort_keys=True))
    wait = ""
    if a.status == PENDING and a.timeout_at is not None:
        left = max(0, int(a.timeout_at - time.time()))
        wait = f" · denied in {left // 60} min unless decided"
    decided = f" · {a.status} by {escape(a.decided_by or '?')}" if a.status != PENDING else ""
    if is_plan(a):
        items = plan_items(a)
        return (
            f"[bold]{a.id}[/] {escape(a.agent)} on {a.task_id}: a plan of {len(items)} "
            f"delegation(s){wait}{decided}" + "".join(_delegation(d) for d in items)
        )
    return (
        f"[bold]{a.id}[/] {escape(a.agent)} on {a.task_id}: {escape(a.tool)} {args}{wait}{decided}"
    )


def _delegation(d: dict[str, object]) -> str:
    tools = d.get("tools")
    shown = ", ".join(map(str, tools)) if isinstance(tools, list) else "as its role allows"
    brief = str(d.get("brief") or "").replace("\n", " ")
    return (
        f"\n  → {escape(str(d.get('to')))}: {escape(str(d.get('title')))} [{d.get('task_id')}]"
        f"\n    tools: {escape(shown)}\n    brief: {escape(brief)}"
    )


def approve(
    approval_id: Annotated[str, typer.Argument(help="The approval (from `firm approvals`).")],
    note: Annotated[str | None, typer.Option(help="A note for the log and the agent.")] = None,
    db: DbOption = None,
    json_mode: JsonOption = False,
) -> None:
    """Approve a waiting call (it runs once, with exactly the arguments shown) or plan (its
    subtasks may start)."""
    _decide(approval_id, APPROVED, note, db, json_mode)


def deny(
    approval_id: Annotated[str, typer.Argument(help="The approval (from `firm approvals`).")],
    reason: Annotated[str, typer.Option(help="Why; the agent is told, and can act on it.")],
    db: DbOption = None,
    json_mode: JsonOption = False,
) -> None:
    """Deny a waiting call or plan: it does not run (a plan's subtasks are cancelled), and
    the agent is told why."""
    if not reason.strip():
        raise typer.BadParameter("give a reason: the agent acts on it", param_hint="--reason")
    _decide(approval_id, DENIED, reason, db, json_mode)


def _decide(
    approval_id: str, decision: str, note: str | None, db: str | None, json_mode: bool
) -> None:
    if note is not None and len(note) > NOTE_MAX:
        raise typer.BadParameter(f"at most {NOTE_MAX} characters", param_hint="--note/--reason")
    with open_existing(db) as firm:
        decided = firm.store.decide_approval(approval_id.strip(), decision, _who(), note)
    if json_mode:
        print_json(decided.to_dict())
    elif is_plan(decided):
        n = len(plan_items(decided))
        console.print(
            f"{decided.id} {decided.status} by {escape(decided.decided_by or '')}: the plan of "
            f"{decided.task_id} ({n} delegation(s)) "
            + (
                "— its subtasks may start now."
                if decision == APPROVED
                else "— its subtasks are cancelled; the agent is told why."
            )
        )
    else:
        console.print(
            f"{decided.id} {decided.status} by {escape(decided.decided_by or '')}: "
            f"{escape(decided.tool)} on {decided.task_id} "
            + (
                "runs when the task's agent is next at work."
                if decision == APPROVED
                else "will not run; the agent is told why."
            )
        )


def register(app: typer.Typer) -> None:
    app.command()(approvals)
    app.command()(approve)
    app.command()(deny)
