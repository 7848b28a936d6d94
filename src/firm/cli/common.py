"""Pieces every command shares: options, output, the watch loop, exit codes."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.markdown import Markdown
from rich.panel import Panel

from firm.api import Firm
from firm.cli.render import counts_line, event_line, task_tree
from firm.store.base import Event
from firm.tasks import Status, Task

EXIT_DONE, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

console = Console()
err_console = Console(stderr=True, soft_wrap=True)  # one error, one line, however long

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar="FIRM_DB",
        help="Store: an SQLite file path or a database URL [default: ./.firm/firm.db].",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def tree_files(tasks: list[Task]) -> list[str]:
    """Every file the tasks delivered, in tree order, each once."""
    return list(dict.fromkeys(f for t in tasks for f in t.files))


def run_summary(firm: Firm, root_id: str) -> dict[str, Any]:
    root = firm.task(root_id)
    tasks = firm.subtree(root_id)
    counts: dict[str, int] = {}
    for t in tasks:
        counts[str(t.status)] = counts.get(str(t.status), 0) + 1
    usage = {
        k: sum(t.usage.get(k, 0) for t in tasks)
        for k in ("calls", "prompt_tokens", "completion_tokens")
    }
    return {
        "id": root.id,
        "status": str(root.status),
        "result": root.result,
        "files": tree_files(tasks),
        "counts": counts,
        "error": root.error,
        "usage": usage,
    }


class _SignalAsInterrupt:
    """SIGTERM stops a run like Ctrl-C does: sessions handed back, everything resumable."""

    def __enter__(self) -> None:
        self._old = None
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGTERM, self._raise)

    @staticmethod
    def _raise(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    def __exit__(self, *exc: object) -> None:
        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)


def watch(firm: Firm, root_ids: list[str], *, json_mode: bool) -> list[Task]:
    """Work the runs to the end, showing progress; returns the root tasks.

    On an interactive terminal a live tree redraws four times a second; otherwise each
    lifecycle event is printed as one line (unless --json, which prints only the result).
    """
    interactive = console.is_terminal and not json_mode
    unsubscribe = None
    if not interactive and not json_mode:
        lock = threading.Lock()

        def log(events: list[Event]) -> None:
            with lock:
                for e in events:
                    line = event_line(e)
                    if line:
                        print(line, flush=True)

        unsubscribe = firm.store.subscribe(log)
    try:
        with _SignalAsInterrupt():
            firm.engine.start()
            if interactive:
                with Live(console=console, refresh_per_second=4, transient=False) as live:
                    while True:
                        views = []
                        finished = True
                        for rid in root_ids:
                            tasks = firm.subtree(rid)
                            views += [
                                task_tree(tasks, max_lines=max(10, console.height - 6)),
                                counts_line(tasks),
                            ]
                            finished &= tasks[0].terminal
                        live.update(Group(*views))
                        if finished or (firm.engine.stuck(root_ids[0]) and len(root_ids) == 1):
                            break
                        time.sleep(0.25)
                return [firm.run_until(r) for r in root_ids]
            return [firm.run_until(r) for r in root_ids]
    finally:
        if unsubscribe:
            unsubscribe()


def report(firm: Firm, root: Task) -> None:
    """The top agent's report and the files the company wrote."""
    summary = run_summary(firm, root.id)
    style = {"done": "green", "failed": "red", "cancelled": "magenta"}.get(
        summary["status"], "yellow"
    )
    body = root.result if root.status == Status.DONE else (root.error or str(root.status))
    console.print(
        Panel(
            Markdown(body or "(no result)"),
            title=f"{root.id} · {root.assignee} · {root.status}",
            border_style=style,
        )
    )
    if summary["files"]:
        company = firm.store.run(root.root_id)
        console.print(f"[bold]Files[/] (in {company.workspace}):")
        for f in summary["files"]:
            console.print(f"  {f}")
    counts = ", ".join(f"{n} {s}" for s, n in sorted(summary["counts"].items()))
    console.print(f"[dim]Tasks: {counts}[/]")


def exit_code_for(tasks: list[Task]) -> int:
    return EXIT_DONE if all(t.status == Status.DONE for t in tasks) else EXIT_FAILED


def resolve_path(p: str | None) -> Path | None:
    return Path(p) if p else None
