"""The simulation brain: deterministic, no key, no network — and every engine path exercised.

A manager splits its task among its direct reports by their titles (one subtask each, worded
for the role) and ends its turn; woken, it merges their results into a report file and
completes. A leaf writes a real markdown deliverable into the workspace and completes.
Latency per turn and seeded failure injection let tests and benchmarks shape a run.
"""

from __future__ import annotations

import contextlib
import functools
import random
import re
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from firm.errors import FirmError, WorkspaceError
from firm.tasks import Status, normalise_title

if TYPE_CHECKING:
    from firm.brains.protocol import Session
    from firm.org import AgentSpec
    from firm.tasks import Task

# Title keywords → the kind of work a person with that title delivers. First match wins, so
# specific roles come before general ones.
ROLES: list[tuple[str, str]] = [
    (r"\b(ceo|chief executive|founder|president)\b", "Company plan"),
    (
        r"\b(cto|chief technology|vp engineering|engineering manager|head of engineering)\b",
        "Technical plan",
    ),
    (r"\b(cmo|chief marketing|head of marketing|marketing manager)\b", "Marketing plan"),
    (r"\b(cfo|chief financial|finance|accounting|controller)\b", "Financial plan"),
    (r"\b(coo|chief operating|operations)\b", "Operations plan"),
    (r"\b(cpo|chief product|product manager|product owner|head of product)\b", "Product spec"),
    (r"\b(security)\b", "Security review"),
    (r"\b(legal|counsel|lawyer)\b", "Legal review"),
    (r"\b(backend|back-end|api)\b", "Backend implementation"),
    (r"\b(frontend|front-end|web|mobile|ios|android)\b", "Frontend implementation"),
    (r"\b(devops|sre|infrastructure|platform|reliability)\b", "Infrastructure plan"),
    (r"\b(qa|quality|test)\w*\b", "Test plan"),
    (r"\b(data|analyst|analytics|scientist|machine learning|ml)\b", "Analysis"),
    (r"\b(design|designer|ux|ui)\b", "Design"),
    (r"\b(seo|growth|performance marketing)\b", "Growth plan"),
    (r"\b(brand|content|copy|writer|editor|communications|pr)\b", "Content"),
    (r"\b(marketing|marketer)\b", "Marketing campaign"),
    (r"\b(sales|account executive|business development)\b", "Sales plan"),
    (r"\b(support|customer success)\b", "Support plan"),
    (r"\b(research|researcher)\b", "Research brief"),
    (r"\b(engineer|developer|programmer)\b", "Implementation"),
]


_AREAS = frozenset(area for _, area in ROLES)
_COMPILED = [(re.compile(pattern), area) for pattern, area in ROLES]


def _may_write(session: Session) -> bool:
    """Whether files.write is among the session's tools: the company has it and the task's
    grant and the agent's own tools allow it. The session works out its tools once; asking
    them is a look at that list."""
    return any(t.name == "files.write" for t in session.tools())


# A failure travels up the tree; each level quotes only the first reason, cut short, so the
# root's reason stays a line or two however deep the tree is.
REASON_CHARS = 240
STREAM_RATE = 10  # updates a second while a simulated agent writes
# Simulated replies that arrive together are acted on one at a time (_delegate).
_ACTING = threading.Lock()


def failure_summary(failed: list[Task]) -> str:
    first = failed[0]
    reason = " ".join((first.error or "no reason given").split())
    if len(reason) > REASON_CHARS:
        reason = reason[: REASON_CHARS - 1] + "…"
    head = "the subtask failed" if len(failed) == 1 else f"all {len(failed)} subtasks failed"
    return f"{head}; first: {first.title} ({first.assignee}, {first.status}): {reason}"


def work_area(agent: AgentSpec) -> str:
    return _area_of(agent.title)


@functools.lru_cache(maxsize=1024)
def _area_of(title: str) -> str:
    # A company has a few dozen titles; each is matched once, not at every turn.
    lowered = title.lower()
    for pattern, area in _COMPILED:
        if pattern.search(lowered):
            return area
    return f"{title} deliverable"


def slug(text: str, limit: int = 48) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return (s[:limit].rstrip("-")) or "work"


def goal_of(title: str) -> str:
    """The goal a subtask serves: its title without the 'Area: ' prefix a manager added."""
    head, sep, rest = title.partition(": ")
    if sep and (head in _AREAS or head.endswith(" deliverable")):
        return rest
    return title


@dataclass
class SimulationBrain:
    latency: float = 0.0
    # Seconds a session stays open after acting (delegating, writing its file) before it
    # ends its turn: a kill or a cancel then lands after the side effects, which is what
    # crash-safety tests need to show nothing is done twice.
    linger: float = 0.0
    fail_agents: frozenset[str] = field(default_factory=frozenset)
    fail_rate: float = 0.0
    seed: int = 0
    name: str = "simulation"

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> SimulationBrain:
        unknown = set(options) - {"latency", "linger", "fail_agents", "fail_rate", "seed"}
        if unknown:
            raise FirmError(f"unknown simulation option(s): {', '.join(sorted(unknown))}")
        rate = float(options.get("fail_rate", 0.0))
        if not 0.0 <= rate <= 1.0:
            raise FirmError(f"--sim-fail-rate must be between 0 and 1, not {rate}")
        latency = float(options.get("latency", 0.0))
        if latency < 0:
            raise FirmError(f"--sim-latency must not be negative, not {latency}")
        linger = float(options.get("linger", 0.0))
        if linger < 0:
            raise FirmError(f"--sim-linger must not be negative, not {linger}")
        return cls(
            latency=latency,
            linger=linger,
            fail_agents=frozenset(options.get("fail_agents") or ()),
            fail_rate=rate,
            seed=int(options.get("seed", 0)),
        )

    def options(self) -> dict[str, Any]:
        return {
            "latency": self.latency,
            "linger": self.linger,
            "fail_agents": sorted(self.fail_agents),
            "fail_rate": self.fail_rate,
            "seed": self.seed,
        }

    def _should_fail(self, session: Session) -> str | None:
        task = session.task
        if task.assignee in self.fail_agents:
            return f"simulated failure: {task.assignee} is set to fail (--sim-fail)"
        if self.fail_rate > 0:
            # Seeded per task, not per call order, so a resumed run makes the same choices.
            rng = random.Random(f"{self.seed}|{task.assignee}|{normalise_title(task.title)}")
            if rng.random() < self.fail_rate:
                return f"simulated failure (rate {self.fail_rate}, seed {self.seed})"
        return None

    def run(self, session: Session) -> str | None:
        task = session.task
        delegating = task.turn == 0 and bool(session.reports) and not self._should_fail(session)
        # Whether it may write is known before its model is asked, as a model is offered its
        # tools with the question: not worked out among the acts after the reply.
        may_write = _may_write(session)
        # The turn's latency is spent writing: the thought a delegating manager logs, or a
        # line about the work, streams to a watched desk word by word, as a model's would.
        if self.latency > 0:
            # The model answers `latency` after it is asked, whatever the session does
            # meanwhile: a manager makes its team's folder while it waits (_make_folder).
            answer_at = time.monotonic() + self.latency
            if delegating and may_write:
                self._make_folder(session)
            pieces = self._plan(session) if delegating else self._working(session)
            self._write(session, pieces, answer_at)
            if not delegating:
                session.stream("")  # a line about the work: it goes to no log
        if task.turn == 0:
            reason = self._should_fail(session)
            if reason:
                session.call("fail_task", {"reason": reason})
                return None
            if session.reports:
                self._delegate(session, may_write)
            else:
                self._deliver(session, may_write)
            return None
        self._merge(session, may_write)
        return None

    def _write(self, session: Session, pieces: list[str], answer_at: float) -> None:
        # The first piece names the goal, so even the first words on a desk say what they
        # are about. Each step ends when the model would have written that far.
        steps = max(1, min(len(pieces), int(self.latency * STREAM_RATE)))
        for step in range(1, steps + 1):
            session.stream(" ".join(pieces[: max(1, round(len(pieces) * step / steps))]))
            session.sleep(answer_at - self.latency * (steps - step) / steps - time.monotonic())

    def _plan(self, session: Session) -> list[str]:
        reports = session.reports
        names = ", ".join(f"{r.name} ({work_area(r)})" for r in reports).split(" ")
        goal = goal_of(session.task.title)
        return [f"Splitting '{goal}'", "among", str(len(reports)), "reports:", *names]

    def _working(self, session: Session) -> list[str]:
        task = session.task
        goal = goal_of(task.title)
        if task.turn > 0:
            return [f"Reading my reports' results on '{goal}'", "and", "merging", "them."]
        area = work_area(session.agent).lower()
        return [f"Working out the {area} for '{goal}',", "first", "things", "first."]

    def _delegate(self, session: Session, may_write: bool) -> None:
        task, me = session.task, session.agent
        goal = goal_of(task.title)
        reports = session.reports
        # One turn is one model reply, as with the llm brain: its text and its delegate_task
        # calls are written in one transaction, so the reports start together — and with
        # the end of the turn, unless the session is to linger after acting.
        # Managers started together get their replies in the same instant (a simulated
        # model's latency is exact). Acted on all at once, their checks, delegations and
        # commits interleave under one interpreter lock, and every team starts only when
        # nearly all have been written; one reply at a time, the first team starts after
        # its own manager's work alone (benchmarks/makespan.py: its reports' start 4.4 ->
        # 2.5 ms after the first reply, the run ~3-6 ms shorter). The lock is held while
        # the reply is acted on, never over a sleep.
        with _ACTING, session.batch_delegations() as reply:
            session.think(" ".join(self._plan(session)))  # a desk's stream ends when it lands
            for report in reports:
                area = work_area(report)
                description = (
                    f"{me.name} ({me.title}) asks {report.name}, {report.title}, for the "
                    f"{area.lower()} part of: {goal}."
                )
                if report.instructions:
                    description += f"\n\nStanding instructions: {report.instructions}"
                result = session.call(
                    "delegate_task",
                    {"assignee": report.id, "title": f"{area}: {goal}", "description": description},
                )
                if not result.ok:
                    session.call("fail_task", {"reason": f"could not delegate: {result.content}"})
                    return None
            if not self.linger:
                reply.end_turn()
        if may_write and not self.latency:
            self._make_folder(session)  # no model time to make it in: while the reports work
        if self.linger:
            session.sleep(self.linger)
        return None

    def _make_folder(self, session: Session) -> None:
        """The team's deliverables and this manager's report go to its folder (_deliver,
        _merge): made before they are written, with a new file ready for each — not by the
        first of them to write, in the moment they all act at once, nor in the merge at the
        end of the run. Made while the model thinks, it is off the run's path: on this
        machine's disk each new inode cost 0.2-1 ms of kernel time, and a manager's folder
        made after its delegations held up the report its thread runs next by 10-40 ms
        (benchmarks/makespan.py). An empty folder is all a failure here leaves, and the
        writes make what they need as before."""
        me, org = session.agent, session.org
        # Reports that deliver write here; reports that delegate write to their own folder.
        files = 1 + sum(1 for r in session.reports if not org.reports(r.id))
        with contextlib.suppress(WorkspaceError, OSError):
            session.workspace.make_folder(me.id, files=files)

    def _deliver(self, session: Session, may_write: bool) -> None:
        task, me = session.task, session.agent
        area = work_area(me)
        goal = goal_of(task.title)
        # A team's deliverables share its manager's folder, where the manager's report goes
        # too: one folder made per team, not one per member (making a folder costs about what
        # making the file does).
        path = f"{me.reports_to or me.id}/{me.id}-{task.id}-{slug(area + ' ' + goal)}.md"
        body = "\n".join(
            [
                f"# {area}: {goal}",
                "",
                f"*By {me.name}, {me.title} · task {task.id} · language {task.language}*",
                "",
                "## Brief",
                "",
                task.description or task.title,
                "",
                "## Deliverable",
                "",
                f'- Scope: the {area.lower()} for "{goal}".',
                f"- Approach: what a {me.title.lower()} would do first, second and third.",
                "- Risks: the assumptions this rests on, to be checked by the manager.",
                "",
            ]
        )
        if not may_write:
            # The grant leaves out files.write: deliver the result as text, as a model would.
            session.sleep(self.linger)
            result = f"{area} for '{goal}' (no file: this task may not write files)."
            session.call("complete_task", {"result": result, "files": []})
            return None
        written = session.call("files.write", {"path": path, "content": body})
        if not written.ok:
            session.call("fail_task", {"reason": f"could not write {path}: {written.content}"})
            return None
        session.sleep(self.linger)
        session.call(
            "complete_task",
            {"result": f"{area} for '{goal}' is written up in {path}.", "files": [path]},
        )
        return None

    def _merge(self, session: Session, may_write: bool) -> None:
        task, me = session.task, session.agent
        subtasks = session.subtasks
        done = [t for t in subtasks if t.status == Status.DONE]
        failed = [t for t in subtasks if t.status in (Status.FAILED, Status.CANCELLED)]
        goal = goal_of(task.title)
        if not done:
            session.call("fail_task", {"reason": failure_summary(failed)})
            return None
        area = work_area(me) if task.parent_id else "Report"
        path = f"{me.id}/{task.id}-report.md"
        lines = [f"# {area}: {goal}", "", f"*By {me.name}, {me.title} · task {task.id}*", ""]
        for t in subtasks:
            lines += [f"## {t.title}", "", f"{t.assignee} → {t.status}", ""]
            if t.status == Status.DONE:
                lines += [t.result or "", ""]
                lines += [f"- [{f}]({f})" for f in t.files] + [""]
            else:
                lines += [f"Not delivered: {t.error}", ""]
        files = [f for t in done for f in t.files]
        if may_write:
            session.call("files.write", {"path": path, "content": "\n".join(lines)})
            files.insert(0, path)
        summary = [f"{area} for '{goal}': merged {len(done)} deliverable(s)."]
        summary += [
            f"- {t.title} by {t.assignee}: {', '.join(t.files) or 'no files'}" for t in done
        ]
        if failed:
            summary += ["", f"Not delivered ({len(failed)}):"]  # a paragraph of its own
            summary += [f"- {t.title} by {t.assignee} → {t.status}: {t.error}" for t in failed]
        session.call(
            "complete_task", {"result": "\n".join(summary), "files": list(dict.fromkeys(files))}
        )
        return None
