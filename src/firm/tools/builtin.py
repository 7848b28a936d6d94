"""The tools every session may get: workspace files, and the lifecycle of a task."""

from __future__ import annotations

from typing import Literal

from firm.tools.registry import ToolContext, ToolDef, make_tool

PriorityName = Literal["low", "normal", "high", "urgent"]


def files_read(ctx: ToolContext, path: str, offset: int = 0, length: int | None = None) -> str:
    """Read a text file from the company workspace. Large files: pass offset and length (bytes)."""
    return ctx.workspace.read(path, offset, length)


def files_write(ctx: ToolContext, path: str, content: str) -> str:
    """Write a text file in the company workspace (a path relative to it), replacing any old one."""
    size = ctx.workspace.write(path, content)
    rel = ctx.workspace.relative(path)
    ctx.wrote_file(rel)
    return f"wrote {size} bytes to {rel}"


def files_list(ctx: ToolContext, path: str = ".") -> str:
    """List the files under a folder of the company workspace."""
    entries = ctx.workspace.list(path)
    return "\n".join(entries) if entries else "(no files)"


def delegate_task(
    ctx: ToolContext,
    assignee: str,
    title: str,
    description: str,
    priority: PriorityName | None = None,
    language: str | None = None,
    tools: list[str] | None = None,
    limits: dict[str, float] | None = None,
    ttl: float | None = None,
) -> str:
    """Hand a subtask to one of your direct reports. It becomes a task of its own and its id is
    returned. After delegating, end your turn: you will be called again with every subtask's
    result once they have all finished. Optional: priority and language (inherited by default),
    and tools, limits and ttl (seconds) to narrow the authority the report works under."""
    task_id = ctx.delegate(
        assignee,
        title,
        description,
        priority=priority,
        language=language,
        tools=tools,
        limits=limits,
        ttl=ttl,
    )
    return f"delegated to {assignee} as task {task_id}"


def complete_task(ctx: ToolContext, result: str, files: list[str] | None = None) -> str:
    """Finish your task with its result (and the workspace files that hold the deliverable)."""
    return ctx.complete(result, files)


def fail_task(ctx: ToolContext, reason: str) -> str:
    """Give up on your task, saying why; your manager sees the reason and decides what to do."""
    return ctx.fail(reason)


def ask_human(ctx: ToolContext, question: str) -> str:
    """Ask a person a question you cannot answer yourself (a decision, a fact only they know).
    Your turn ends: you are woken with their answer, which is this call's result."""
    return ctx.ask_human(question)


FILE_TOOLS: list[ToolDef] = [
    make_tool("files.read", files_read),
    make_tool("files.write", files_write),
    make_tool("files.list", files_list),
]

DELEGATE = make_tool("delegate_task", delegate_task, lifecycle=True)
COMPLETE = make_tool("complete_task", complete_task, lifecycle=True)
FAIL = make_tool("fail_task", fail_task, lifecycle=True)
ASK_HUMAN = make_tool("ask_human", ask_human, lifecycle=True)  # offered as the chart allows
LIFECYCLE_TOOLS: list[ToolDef] = [DELEGATE, COMPLETE, FAIL, ASK_HUMAN]
