"""Commands that read or steer the store: tasks, show, cancel."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from firm.cli.common import (
    DbOption,
    JsonOption,
    console,
    open_existing,
    print_json,
    resolve_task_id,
    tree_files,
)
from firm.cli.cost import tree_cost
from firm.cli.render import ICONS, counts_line, elapsed, task_tree, tasks_table
from firm.pricing import format_cost
from firm.tasks import Status


def tasks(
    tree: Annotated[bool, typer.Option("--tree", help="Show each run as a tree.")] = False,
    status: Annotated[str | None, typer.Option(help="Only tasks with this status.")] = None,
    assignee: Annotated[str | None, typer.Option(help="Only tasks of this agent.")] = None,
    root: Annotated[
        str | None,
        typer.Option(help="Only the run with this root task (an id, or a prefix of one)."),
    ] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=100_000, help="At most this many tasks, oldest first.")
    ] = 1000,
    db: DbOption = None,
    json_mode: JsonOption = False,
) -> None:
    """List the tasks in the store."""
    if status is not None and status not in {s.value for s in Status}:
        raise typer.BadParameter(
            f"{status!r} is not a status (one of: {', '.join(s.value for s in Status)})",
            param_hint="--status",
        )
    with open_existing(db) as firm:
        if root is not None:
            root = firm.task(resolve_task_id(firm, root)).root_id
        rows = firm.tasks(status=status, assignee=assignee, root_id=root, limit=limit)
        if json_mode:
            print_json([t.to_dict() for t in rows])
            return
        if not rows:
            console.print(f"No tasks in {firm.store.safe_url}.")
            return
        if tree:
            for rid in dict.fromkeys(t.root_id for t in rows):
                sub = firm.subtree(rid)
                console.print(task_tree(sub, max_lines=10_000))
                console.print(counts_line(sub))
        else:
            console.print(tasks_table(rows))


def show(
    task_id: Annotated[
        str, typer.Argument(help="The task's id, e.g. T-1a2b3c4d, or a prefix only it has.")
    ],
    db: DbOption = None,
    json_mode: JsonOption = False,
) -> None:
    """Show one task in full: result, files, error, subtasks, usage and recent activity."""
    with open_existing(db) as firm:
        task = firm.task(resolve_task_id(firm, task_id))
        task_id = task.id
        sub = firm.subtree(task_id)
        children = [t for t in sub if t.parent_id == task_id]
        usage = {
            k: sum(t.usage.get(k, 0) for t in sub)
            for k in ("calls", "prompt_tokens", "completion_tokens")
        }
        cost = tree_cost(firm, task.root_id, sub) if usage["calls"] else None
        if json_mode:
            data = task.to_dict()
            data["subtasks"] = [t.to_dict() for t in children]
            data["tree_usage"] = usage
            data["tree_cost"] = cost
            data["tree_files"] = tree_files(sub)
            print_json(data)
            return
        icon, style = ICONS[task.status]
        console.print(f"[bold]{escape(task.title)}[/]")
        console.print(
            f"[{style}]{icon} {task.status}[/]  {task.id} · {task.assignee} · "
            f"from {task.created_by} · priority {task.priority} · "
            f"language {task.language} · {elapsed(task)}"
        )
        if task.parent_id:
            console.print(f"parent: {task.parent_id}")
        if task.description and task.description != task.title:
            console.print(f"\n{escape(task.description)}")
        if task.result:
            console.print(f"\n[bold]Result[/]\n{escape(task.result)}")
        if task.error:
            console.print(f"\n[bold red]Reason[/]\n{escape(task.error)}")
        if task.files:
            console.print("\n[bold]Files[/]\n" + "\n".join(f"  {f}" for f in task.files))
        if any(usage.values()):
            console.print(
                f"\n[bold]Model usage[/] (this task and its subtasks): "
                f"{usage['calls']} calls, {usage['prompt_tokens']} prompt tokens, "
                f"{usage['completion_tokens']} completion tokens"
                + (f", about {format_cost(cost)} at the chart's prices" if cost is not None else "")
            )
        if len(sub) > 1:
            console.print("\n[bold]Subtasks[/]")
            console.print(task_tree(sub, max_lines=200))


def cancel(
    task_id: Annotated[str, typer.Argument(help="The task to cancel, with its subtree.")],
    reason: Annotated[
        str, typer.Option(help="Why; shown to the manager.")
    ] = "cancelled by the user",
    db: DbOption = None,
    json_mode: JsonOption = False,
) -> None:
    """Cancel a task and everything open beneath it. Running sessions stop at their next step."""
    with open_existing(db) as firm:
        task_id = resolve_task_id(firm, task_id)
        cancelled = firm.cancel(task_id, reason)
        if json_mode:
            print_json({"cancelled": cancelled})
        elif cancelled:
            console.print(f"Cancelled {len(cancelled)} task(s): " + ", ".join(cancelled))
        else:
            console.print(f"{task_id} had nothing open to cancel.")


def register(app: typer.Typer) -> None:
    app.command()(tasks)
    app.command()(show)
    app.command()(cancel)
