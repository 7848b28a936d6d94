"""Commands for people talking to the company: notes on tasks, and agents' questions."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from firm.cli.approvals import _who
from firm.cli.common import (
    DbOption,
    JsonOption,
    console,
    open_existing,
    print_json,
    resolve_task_id,
)
from firm.people import TEXT_MAX
from firm.store.approvals import PENDING
from firm.store.questions import Question


def note(
    task_id: Annotated[str, typer.Argument(help="The task (from `firm status` or the office).")],
    text: Annotated[str, typer.Argument(help="The note; its agent reads it in its next brief.")],
    db: DbOption = None,
    json_mode: JsonOption = False,
) -> None:
    """Leave a note on a task: it is in the log, and in the task's next brief."""
    _bounded(text, "TEXT")
    with open_existing(db) as firm:
        left = firm.store.add_note(resolve_task_id(firm, task_id.strip()), _who(), text)
        status = firm.store.get_task(left.task_id).status
    if json_mode:
        print_json(left.to_dict())
        return
    after = (
        "it is recorded; the task has ended, so no agent will read it."
        if status.terminal
        else "its agent reads it in the task's next brief."
    )
    console.print(f"Note left on {left.task_id} by {escape(left.by)}: {after}")


def notes(
    task_id: Annotated[str, typer.Argument(help="The task.")],
    db: DbOption = None,
    json_mode: JsonOption = False,
) -> None:
    """The notes people left on a task, oldest first."""
    with open_existing(db) as firm:
        # An unknown task is an error, not "no notes".
        items = firm.store.notes(resolve_task_id(firm, task_id.strip()))
    if json_mode:
        print_json([n.to_dict() for n in items])
        return
    if not items:
        console.print(f"No notes on {escape(task_id)}.")
    for n in items:
        console.print(f"[bold]{escape(n.by)}[/]: {escape(n.text)}")


def questions(
    all_: Annotated[
        bool, typer.Option("--all", help="Answered ones too, not only those waiting.")
    ] = False,
    db: DbOption = None,
    json_mode: JsonOption = False,
) -> None:
    """List the questions agents asked that wait for a person's answer."""
    with open_existing(db) as firm:
        items = firm.store.questions(status=None if all_ else PENDING)
    if json_mode:
        print_json([q.to_dict() for q in items])
        return
    if not items:
        console.print("No question waits for an answer." if not all_ else "No questions yet.")
        return
    for q in items:
        console.print(_line(q))


def _line(q: Question) -> str:
    head = f"[bold]{q.id}[/] {escape(q.agent)} on {q.task_id} asks: {escape(q.question)}"
    if q.status == PENDING:
        return head
    return f"{head}\n  {q.status} by {escape(q.answered_by or '?')}: {escape(q.answer or '')}"


def answer(
    question_id: Annotated[str, typer.Argument(help="The question (from `firm questions`).")],
    text: Annotated[str, typer.Argument(help="Your answer: the agent's ask_human result.")],
    db: DbOption = None,
    json_mode: JsonOption = False,
) -> None:
    """Answer an agent's question: its task goes on with your answer."""
    _bounded(text, "TEXT")
    with open_existing(db) as firm:
        answered = firm.store.answer_question(question_id.strip(), _who(), text)
    if json_mode:
        print_json(answered.to_dict())
        return
    console.print(
        f"{answered.id} answered by {escape(answered.answered_by or '')}: {answered.agent} "
        f"reads it when {answered.task_id} is next at work."
    )


def _bounded(text: str, hint: str) -> None:
    if len(text) > TEXT_MAX:
        raise typer.BadParameter(f"at most {TEXT_MAX} characters", param_hint=hint)
    if not text.strip():
        raise typer.BadParameter("it is empty", param_hint=hint)


def register(app: typer.Typer) -> None:
    app.command()(note)
    app.command()(notes)
    app.command()(questions)
    app.command()(answer)
