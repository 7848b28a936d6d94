"""A team's runs in a store: start one, find one a killed process left unfinished or one
that finished, and read what one produced. Shared by `Team.start()` and `firm team run`."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from firm.api import Firm
from firm.events import EventKind
from firm.language import detect_language
from firm.tasks import Status, Task
from firm.teams.ledger import TeamState, read
from firm.teams.review import REVIEW_KINDS, reviews_from
from firm.teams.spec import (
    BRAIN_NAME,
    COORDINATOR,
    DEFAULT_MODEL,
    DOWNGRADED,
    MANAGER_OUTPUTS,
    TeamSpec,
)


def llm_options(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The LLM brain's options for a new run: the model and endpoint the environment names
    now (so a resume in another shell calls the same ones), firm's default model when
    nothing names one, and whatever the caller adds. The key is never stored."""
    from firm.brains.llm import submission_options

    options = submission_options()
    options.setdefault("default_model", DEFAULT_MODEL)
    options.update(extra or {})
    return options


def submit(
    firm: Firm,
    spec: TeamSpec,
    *,
    workspace: str | Path | None = None,
    llm: dict[str, Any] | None = None,
    start: bool = False,
) -> Task:
    """Create the team's run: its root task, assigned to the coordinator. Nothing runs yet
    — with start=True, the firm's engine starts and the run's commit starts its first
    session (Firm.submit). A missing model or key is reported here, before anything is
    created."""
    descriptions = "\n".join(t.description for t in spec.tasks)
    title = f"Team {spec.name}: {len(spec.tasks)} task(s), {spec.process}"
    goal = title + "\n\n" + "\n".join(f"- {t.id}: {t.description.strip()}" for t in spec.tasks)
    # The chart is stored as the text it was parsed from: spec.org_yaml(), not made twice.
    return firm.submit(
        spec.org_chart(),
        goal,
        brain=BRAIN_NAME,
        brain_options={"team": spec.model_dump(mode="json"), "llm": llm_options(llm)},
        workspace=workspace,
        language=spec.language or detect_language(descriptions),
        start=start,
    )


def open_run(firm: Firm, spec: TeamSpec) -> str | None:
    """The root of an unfinished run of this same team, if the store holds one."""
    key = spec.key()
    for root_id in firm.store.open_run_ids():
        if _same_team(firm, root_id, key):
            return root_id
    return None


FINISHED_PAGE = 500
ANSWER_POLL = 1.0  # seconds between looks at the store while a person is asked (a safety net)


def await_answers(firm: Firm, root_id: str) -> bool:
    """While the run waits for a person (the review of a human_input task's output): say
    what is asked and how to answer, and wait for the answer, from this process or any
    other. False when nothing in the run waits for a person."""
    if firm.task(root_id).status != Status.WAITING:
        return False
    waiting = firm.store.questions(status="pending", root_id=root_id)
    if not waiting:
        return False
    for q in waiting:
        print(
            f"[team] waiting for a person — question {q.id}:\n{q.question}\n"
            f"[team] answer with: firm answer {q.id} accept   (or your feedback)",
            file=sys.stderr,
            flush=True,
        )
    while True:
        seen = firm.store.last_seq()
        if firm.task(root_id).status.terminal:
            return True
        if all(firm.store.get_question(q.id).status != "pending" for q in waiting):
            return True
        firm.store.wait_for_change(seen, ANSWER_POLL)


def finished_run(firm: Firm, spec: TeamSpec) -> str | None:
    """The root of the latest run of this same team (same definition, same inputs) that
    ended with every task done, if the store holds one: its outputs are the team's."""
    key = spec.key()
    found, offset = None, 0
    while True:
        # A team run's root is the coordinator's; the list is oldest first.
        page = firm.store.list_tasks(
            status=str(Status.DONE), assignee=COORDINATOR, limit=FINISHED_PAGE, offset=offset
        )
        for task in page:
            if task.parent_id is None and _same_team(firm, task.id, key):
                found = task.id
        if len(page) < FINISHED_PAGE:
            return found
        offset += FINISHED_PAGE


def _same_team(firm: Firm, root_id: str, key: str) -> bool:
    run = firm.store.run(root_id)
    if run.brain != BRAIN_NAME:
        return False
    stored = (run.brain_options or {}).get("team")
    try:
        return stored is not None and TeamSpec.model_validate(stored).key() == key
    except ValueError:
        return False


def cancel_leftovers(firm: Firm, root_id: str, tree: list[Task] | None = None) -> list[str]:
    """Cancel the tasks still open in a run that has ended. Only background tasks can be
    left so: their manager's turn failed (or the run was ended) while they ran, and the
    wake rule has nobody left to wake. Nothing of an ended run should work on, or be picked
    up by a later `firm resume`. `tree`: the run's subtree, if the caller has just read it."""
    tree = firm.subtree(root_id) if tree is None else tree
    if not tree[0].terminal:
        return []
    open_ids = {t.id for t in tree if not t.terminal}
    tops = [t for t in tree if t.id in open_ids and t.parent_id not in open_ids]
    cancelled: list[str] = []
    for task in tops:
        cancelled += firm.cancel(task.id, f"the team's run ended ({tree[0].status})")
    return cancelled


@dataclass
class TeamResult:
    """What a team run produced, read from the store."""

    run_id: str
    status: Status
    error: str | None
    spec: TeamSpec
    state: TeamState
    # (manager turn's firm task, turn number) -> reasons its answers were rejected, and the
    # response formats the model API refused
    rejections: dict[tuple[str, Any], list[str]]
    downgrades: dict[tuple[str, Any], list[dict[str, Any]]]

    @property
    def done(self) -> bool:
        return self.status == Status.DONE

    @property
    def last_output(self) -> str | None:
        """The raw output of the team's last task — never the manager's text."""
        return self.state.tasks[self.spec.tasks[-1].id].output

    def task_status(self, task_id: str) -> str:
        s = self.state.tasks[task_id]
        if s.done:
            return "done"
        return "failed" if s.attempts else "not started"

    def manager(self) -> dict[str, Any] | None:
        if not self.spec.hierarchical:
            return None
        turns = []
        for turn in self.state.turns:
            trace = turn.trace()
            key = (turn.task.id, turn.number)
            if self.rejections.get(key):
                trace["rejected"] = self.rejections[key]
            if self.downgrades.get(key):
                trace["downgraded"] = self.downgrades[key]
            turns.append(trace)
        if self.done:
            status = "completed"
        elif self.status.terminal:
            status = "failed"
        else:
            status = str(self.status)
        mode = self.spec.manager_output
        for steps in self.downgrades.values():
            for step in steps:  # the weakest format asked for wins: it is the one in use
                mode = max(mode, step["to"], key=MANAGER_OUTPUTS.index)
        return {"status": status, "reason": self.error, "response_format": mode, "turns": turns}

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": str(self.status),
            "error": self.error,
            "task_status": {t.id: self.task_status(t.id) for t in self.spec.tasks},
            "task_results": {t.id: self.state.tasks[t.id].output for t in self.spec.tasks},
            "manager": self.manager(),
        }


def collect(
    firm: Firm, root_id: str, *, spec: TeamSpec | None = None, tree: list[Task] | None = None
) -> TeamResult:
    """What the run produced. `spec`: the team the run was submitted with, when the caller
    submitted it (else read from the run); `tree`: its subtree, read since it ended."""
    if spec is None:
        spec = TeamSpec.model_validate(firm.store.run(root_id).brain_options["team"])
    tree = firm.subtree(root_id) if tree is None else tree
    root = tree[0]
    asked = (
        firm.store.events_after(0, 1_000_000, [root_id], kinds=REVIEW_KINDS)
        if spec.reviewed
        else []
    )
    state = read(spec, tree, reviews_from(asked))
    rejections: dict[tuple[str, Any], list[str]] = {}
    downgrades: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    turn_ids = list(dict.fromkeys(t.task.id for t in state.turns))
    if turn_ids:
        for e in firm.store.events_after(
            0, 1_000_000, task_ids=turn_ids, kinds=[EventKind.MANAGER_DECISION, DOWNGRADED]
        ):
            key = (e.task_id or "", e.data.get("turn"))
            if e.kind == EventKind.MANAGER_DECISION and e.data.get("verdict") == "rejected":
                rejections.setdefault(key, []).append(str(e.data.get("reason")))
            elif e.kind == DOWNGRADED and e.data.get("to") in MANAGER_OUTPUTS:
                step = {k: e.data.get(k) for k in ("from", "to", "error")}
                downgrades.setdefault(key, []).append(step)
    return TeamResult(root_id, root.status, root.error, spec, state, rejections, downgrades)
