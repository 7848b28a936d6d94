"""Pieces every command shares: options, output, the watch loop, exit codes."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, Group

from firm.api import Firm
from firm.cli.render import counts_line, event_line, task_tree
from firm.errors import FirmError, TaskNotFound
from firm.store import DEFAULT_DB
from firm.store.base import Event
from firm.tasks import Status, Task

EXIT_DONE, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

# Piped or redirected output keeps each line whole (no wrapping at 80 columns); a terminal
# wraps at its width.
console = Console(soft_wrap=not sys.stdout.isatty())
# Event lines arrive on the engine's threads; the final report is printed on the main one.
# Both write under this lock, so a line and the report's panel never share a line.
OUTPUT_LOCK = threading.RLock()
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
    lines: EventLines | None = None
    if not interactive and not json_mode:
        lines = EventLines(firm.store.last_seq())
        unsubscribe = firm.store.subscribe(lines.print)
    try:
        with _SignalAsInterrupt():
            firm.engine.start()
            if interactive:
                from rich.live import Live  # only when watching a terminal

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
            roots = [firm.run_until(r) for r in root_ids]
            if lines is not None:
                lines.catch_up(firm, root_ids)
            return roots
    finally:
        if unsubscribe:
            unsubscribe()


class EventLines:
    """The line each lifecycle entry this process commits prints, once, as it commits.

    A commit's lines are printed by the thread that made it, after the commit: the engine
    hears of the run's end in the same round of listeners, and a reader can see it as soon
    as it is committed, so the run's last lines could still be on their way while the
    report was printed (on a loaded machine they came after it). `catch_up` prints what was
    committed after the last line printed, from the store, before the report; a line on its
    way then finds itself printed."""

    def __init__(self, after: int):
        self._after = after  # every entry up to here is printed, or was there before
        self._printed: set[int] = set()  # printed entries past _after
        self._last = after  # the newest entry printed

    def print(self, events: list[Event]) -> None:
        with OUTPUT_LOCK:
            fresh = [e for e in events if e.seq > self._after and e.seq not in self._printed]
            if not fresh:
                return
            self._printed.update(e.seq for e in fresh)
            self._last = max(self._last, fresh[-1].seq)
            # Kept small: only entries past a gap (another process's, on PostgreSQL) stay.
            while self._after + 1 in self._printed:
                self._after += 1
                self._printed.discard(self._after)
            out = [line for line in map(event_line, fresh) if line]
            if out:
                console.file.write("".join(f"{line}\n" for line in out))
                console.file.flush()

    def catch_up(self, firm: Firm, root_ids: list[str]) -> None:
        """Print the watched runs' entries committed after the last line printed. Only theirs:
        on a shared store (PostgreSQL, several workers) the log also holds other runs'."""
        ours = {t.id for rid in root_ids for t in firm.subtree(rid)}
        with OUTPUT_LOCK:
            while page := firm.store.events_after(self._last, 1000):
                self.print([e for e in page if e.task_id in ours])
                self._last = max(self._last, page[-1].seq)
                if len(page) < 1000:
                    return


def report(firm: Firm, root: Task) -> None:
    """The top agent's report and the files the company wrote."""
    with OUTPUT_LOCK:
        _report(firm, root)


def _report(firm: Firm, root: Task) -> None:
    from rich.markdown import Markdown  # markdown-it and pygments, only when printing a report
    from rich.panel import Panel

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
    # A finished run's files are the ones its top agent delivered (a revoked or failed
    # subtree's leftovers are not among them); an unfinished run shows what exists so far.
    files = root.files if root.status == Status.DONE else summary["files"]
    if files:
        company = firm.store.run(root.root_id)
        console.print(f"[bold]Files[/] (in {company.workspace}):")
        for f in files:
            console.print(f"  {f}")
    counts = ", ".join(f"{n} {s}" for s, n in sorted(summary["counts"].items()))
    console.print(f"[dim]Tasks: {counts}[/]")


def exit_code_for(tasks: list[Task]) -> int:
    return EXIT_DONE if all(t.status == Status.DONE for t in tasks) else EXIT_FAILED


def resolve_path(p: str | None) -> Path | None:
    return Path(p) if p else None


def open_existing(db: str | None) -> Firm:
    """The store a read command looks at, which must exist already: reading never creates a
    store (nor the folders on its path)."""
    value = db or os.environ.get("FIRM_DB") or str(DEFAULT_DB)
    path = Path(value[len("sqlite:///") :]) if value.startswith("sqlite:///") else Path(value)
    if ("://" not in value or value.startswith("sqlite:///")) and not path.is_file():
        raise FirmError(
            f"no store at {path.absolute()}: nothing has run with it yet "
            "(name another with --db or FIRM_DB; `firm run` creates one)"
        )
    return Firm(db)


def resolve_task_id(firm: Firm, given: str) -> str:
    """A task id, or an unambiguous prefix of one (`T-444d`), as the full id."""
    try:
        return firm.task(given).id
    except TaskNotFound:
        pass
    if len(given) >= 4:
        matches = firm.store.task_ids_with_prefix(given, limit=6)
        if len(matches) == 1:
            return matches[0]
        if matches:
            shown = ", ".join(matches[:5]) + (", …" if len(matches) > 5 else "")
            raise FirmError(f"{given!r} is the start of several task ids ({shown}); give more")
    raise FirmError(f"no task with id {given!r} in {firm.store.safe_url}")


OrgArgument = Annotated[
    Path,
    typer.Argument(metavar="ORG", help="The org chart (YAML), or its folder.", show_default=False),
]
GoalArgument = Annotated[
    str | None,
    typer.Argument(metavar="GOAL", help="The goal for the top agent.", show_default=False),
]


def chart_path(org_file: Path) -> Path:
    """The org chart a command was given: a folder stands for the company.yaml in it."""
    if org_file.is_dir():
        inside = org_file / "company.yaml"
        if inside.is_file():
            return inside
        raise FirmError(
            f"{org_file} is a folder, not an org chart, and holds no company.yaml "
            f"(`firm init {org_file}` writes one)"
        )
    return org_file


def chart_and_goal(command: str, org_file: Path, goal: str | None) -> tuple[Path, str]:
    """ORG and GOAL, or a usage error that names what is missing."""
    if goal is None:
        given = str(org_file)
        if not org_file.exists() and not given.endswith((".yaml", ".yml")):
            raise FirmError(
                f"firm {command} takes an org chart, then the goal: {given!r} reads as the "
                f'goal, so the chart is missing — e.g. firm {command} acme/company.yaml "{given}" '
                "(`firm init acme` writes one)"
            )
        raise FirmError(
            f"firm {command} takes an org chart, then the goal — the goal is missing: "
            f'firm {command} {given} "Launch an AI note-taking app"'
        )
    return chart_path(org_file), goal
