"""Terminal rendering of tasks: the live tree, tables, one task in full."""

from __future__ import annotations

import time
from collections import defaultdict

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from firm.endings import ends_many
from firm.events import CATALOGUE, EventKind
from firm.store.base import Event
from firm.tasks import Status, Task

ICONS = {
    Status.TODO: ("·", "dim"),
    Status.IN_PROGRESS: ("▶", "yellow"),
    Status.WAITING: ("⏸", "cyan"),
    Status.DONE: ("✔", "green"),
    Status.FAILED: ("✘", "red"),
    Status.CANCELLED: ("⊘", "magenta"),
}


def elapsed(task: Task, now: float | None = None) -> str:
    if task.started_at is None:
        return ""
    end = task.finished_at or (now or time.time())
    secs = max(0.0, end - task.started_at)
    if secs < 60:
        return f"{secs:.1f}s"
    minutes, s = divmod(int(secs), 60)
    return f"{minutes}m{s:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def task_line(task: Task, now: float | None = None) -> Text:
    icon, style = ICONS[task.status]
    title = task.title if len(task.title) <= 70 else task.title[:69] + "…"
    line = Text()
    line.append(f"{icon} ", style=style)
    line.append(title, style="bold" if task.status == Status.IN_PROGRESS else "")
    meta = f"  {task.assignee} · {task.status} · {task.id}"
    if e := elapsed(task, now):
        meta += f" · {e}"
    line.append(meta, style="dim")
    return line


def _visible(tasks: list[Task], max_lines: int) -> set[str]:
    """Which tasks to draw: every open or failed task with its ancestors first, then the rest."""
    by_id = {t.id: t for t in tasks}
    keep: set[str] = set()
    for t in tasks:
        if not t.status.terminal or t.status == Status.FAILED:
            cur: Task | None = t
            while cur is not None and cur.id not in keep:
                keep.add(cur.id)
                cur = by_id.get(cur.parent_id) if cur.parent_id else None
    for t in tasks:  # tasks come parents-first, so the tree stays connected
        if len(keep) >= max_lines:
            break
        if t.parent_id is None or t.parent_id in keep:
            keep.add(t.id)
    return keep


def task_tree(tasks: list[Task], max_lines: int = 60, now: float | None = None) -> RenderableType:
    """A tree of one run's tasks (parents before children), trimmed to max_lines."""
    if not tasks:
        return Text("(no tasks)", style="dim")
    now = now or time.time()
    keep = _visible(tasks, max_lines)
    children: dict[str | None, list[Task]] = defaultdict(list)
    for t in tasks:
        children[t.parent_id].append(t)
    ids = {t.id for t in tasks}
    roots = [t for t in tasks if t.parent_id is None or t.parent_id not in ids]
    trees = []
    for root in roots:
        tree = Tree(task_line(root, now))
        stack = [(root, tree)]
        while stack:
            node, branch = stack.pop(0)
            hidden = 0
            for child in children.get(node.id, []):
                if child.id in keep:
                    stack.append((child, branch.add(task_line(child, now))))
                else:
                    hidden += 1
            if hidden:
                branch.add(Text(f"… {hidden} more subtask(s)", style="dim"))
        trees.append(tree)
    return Group(*trees)


def counts_line(tasks: list[Task]) -> Text:
    counts: dict[Status, int] = defaultdict(int)
    for t in tasks:
        counts[t.status] += 1
    text = Text()
    for status in Status:
        if counts[status]:
            icon, style = ICONS[status]
            text.append(f"{icon} {counts[status]} {status}   ", style=style)
    return text


def tasks_table(tasks: list[Task]) -> Table:
    table = Table(show_edge=False, header_style="bold")
    for col in ("id", "status", "assignee", "priority", "title", "parent"):
        table.add_column(col)
    for t in tasks:
        icon, style = ICONS[t.status]
        table.add_row(
            t.id,
            Text(f"{icon} {t.status}", style=style),
            t.assignee,
            str(t.priority),
            escape(t.title[:80]),
            t.parent_id or "",
        )
    return table


# A plain log shows a task's life: every kind that moves a task (and revocations, denials).
EVENT_WORDS: dict[str, str] = {
    **{k: k.value for k, spec in CATALOGUE.items() if spec.status is not None},
    EventKind.REVOKED: "revoked",
    EventKind.TOOL_DENIED: "denied",
}


def event_line(e: Event) -> str | None:
    """One plain line for a lifecycle event (for logs when the terminal is not interactive)."""
    word = EVENT_WORDS.get(e.kind)
    if word is None:
        return None
    clock = time.strftime("%H:%M:%S", time.localtime(e.ts))
    extra = ""
    if e.kind == EventKind.DELEGATED:
        extra = f" → {e.data.get('to')}: {e.data.get('title')}"
    elif e.kind == EventKind.CREATED:
        extra = f": {e.data.get('title')}"
    elif e.kind == EventKind.FAILED:
        extra = f": {e.data.get('error')}"
    elif e.kind == EventKind.TOOL_DENIED:
        extra = f" {e.data.get('tool')} ({e.data.get('code')})"
    elif ends_many(e.kind, e.data):  # one entry for the whole subtree (firm/endings.py)
        n = e.data.get("ended")
        extra = f": {n} task{'s' if n != 1 else ''} under it: {e.data.get('reason')}"
    return f"{clock} {word:<9} {e.task_id} {e.agent or ''}{extra}"
