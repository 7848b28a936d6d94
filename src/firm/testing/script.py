"""A scripted model: rules that decide what the "model" answers to each request.

    model = ScriptedModel()
    model.when(agent="ceo", woken=False).reply(
        calls(delegate("cto", "Technical plan", "Plan the app"), text="Handing this out.")
    )
    model.when(agent="ceo", woken=True).reply(calls(complete("Launched.")))
    model.when(agent="cto").reply(error(429), calls(write_file("cto/plan.md", "…"),
                                                     complete("Plan written", ["cto/plan.md"])))

Rules are tried in the order they were added. A rule's replies are used one per matching
request, in order; once used up the rule no longer matches, so the next rule (or the
default) answers. `.always(reply)` never runs out. A reply may also be a function of the
request. Without a matching rule the model falls back to `default` — the autopilot unless
you pass `default=None`, in which case the request is answered with a 400 error that
names the agent and step, so a missing rule is plain to see.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from firm.brains.llm_prompt import AGENT_ID_LABEL, REPORTS_HEADING

# --- what a rule sees -------------------------------------------------------------------------


@dataclass
class ModelRequest:
    """A chat-completions request as the scripted model sees it."""

    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def system(self) -> str:
        for m in self.messages:
            if m.get("role") in ("system", "developer"):
                return _text(m.get("content"))
        return ""

    @property
    def brief(self) -> str:
        """The first user message: the task's brief."""
        for m in self.messages:
            if m.get("role") == "user":
                return _text(m.get("content"))
        return ""

    @property
    def agent(self) -> str | None:
        found = self.headers.get("x-firm-agent")
        if found:
            return found
        for line in self.system.splitlines():
            if AGENT_ID_LABEL in line:
                return line.split(AGENT_ID_LABEL, 1)[1].strip().split()[0].rstrip(".")
        return None

    @property
    def task_id(self) -> str | None:
        return self.headers.get("x-firm-task")

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.body.get("tools") or [])

    @property
    def tool_names(self) -> list[str]:
        return [t.get("function", {}).get("name", "") for t in self.tools]

    def tool(self, name: str) -> dict[str, Any] | None:
        for t in self.tools:
            if t.get("function", {}).get("name") == name:
                return t["function"]  # type: ignore[no-any-return]
        return None

    @property
    def step(self) -> int:
        """How many times the model has answered in this session before this request."""
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    @property
    def woken(self) -> bool:
        """True when the brief lists results of subtasks (a manager's merge turn)."""
        return "Your reports have finished the subtasks" in self.brief

    @property
    def tool_results(self) -> list[str]:
        """The tool results since the model's last reply, in order."""
        out: list[str] = []
        for m in reversed(self.messages):
            if m.get("role") != "tool":
                break
            out.append(_text(m.get("content")))
        return list(reversed(out))

    @property
    def reports(self) -> list[tuple[str, str]]:
        """(id, 'Name, Title') of the agent's direct reports, read from the system prompt."""
        lines = self.system.split(REPORTS_HEADING, 1)
        if len(lines) < 2:
            return []
        found = []
        for line in lines[1].lstrip("\n").splitlines():
            if not line.startswith("- "):
                break
            ident, _, who = line[2:].partition(": ")
            found.append((ident.strip(), who.split(" — ")[0].strip()))
        return found

    @property
    def task_title(self) -> str:
        first = self.brief.splitlines()[0] if self.brief else ""
        head, sep, rest = first.partition(": ")
        return rest if sep and head.startswith("Task ") else first

    @property
    def goal(self) -> str:
        """The task title without the 'Someone part: ' prefixes the autopilot adds."""
        return self.task_title.rsplit(" part: ", 1)[-1]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


# --- what the model answers -------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCallSpec:
    name: str
    arguments: str  # raw JSON text, as a model sends it (may be deliberately malformed)


@dataclass(frozen=True)
class Reply:
    """An answer: an assistant message, or an HTTP failure."""

    text: str = ""
    tool_calls: tuple[ToolCallSpec, ...] = ()
    finish_reason: str | None = None
    status: int = 200  # not 200: answer with this error instead
    error_message: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    hang: float | None = None  # seconds to stall before answering (inf: until the server stops)
    # Seconds from the request's arrival to the answer, as a remote model's latency: the
    # server's own work (reading the request, choosing and encoding the answer) counts inside.
    delay: float = 0.0
    drop: bool = False  # close the connection without an answer
    chunk_delay: float = 0.0  # streaming: seconds between chunks
    chunk_size: int = 12  # streaming: characters per text or arguments chunk
    usage: tuple[int, int] | None = None  # (prompt, completion) to report instead of estimates


Responder = Callable[[ModelRequest], Reply]


def call(name: str, /, **arguments: Any) -> ToolCallSpec:
    """A tool call with these arguments (name as the model sees it, e.g. 'files_write')."""
    return ToolCallSpec(name, json.dumps(arguments, ensure_ascii=False))


def call_raw(name: str, raw_arguments: str) -> ToolCallSpec:
    """A tool call whose arguments text is sent exactly as given (to test bad JSON)."""
    return ToolCallSpec(name, raw_arguments)


def delegate(assignee: str, title: str, description: str = "", **more: Any) -> ToolCallSpec:
    return call(
        "delegate_task", assignee=assignee, title=title, description=description or title, **more
    )


def complete(result: str, files: list[str] | None = None) -> ToolCallSpec:
    return call("complete_task", result=result, **({"files": files} if files is not None else {}))


def fail(reason: str) -> ToolCallSpec:
    return call("fail_task", reason=reason)


def write_file(path: str, content: str) -> ToolCallSpec:
    return call("files_write", path=path, content=content)


def calls(*tool_calls: ToolCallSpec, text: str = "", **options: Any) -> Reply:
    """An assistant reply making these tool calls (optionally with text before them)."""
    return Reply(text=text, tool_calls=tuple(tool_calls), finish_reason="tool_calls", **options)


def text(content: str, **options: Any) -> Reply:
    """An assistant reply with text only. `finish_reason='length'` makes it look cut off."""
    options.setdefault("finish_reason", "stop")
    return Reply(text=content, **options)


def error(status: int, message: str = "", *, retry_after: float | None = None) -> Reply:
    """Answer with an HTTP error, in the OpenAI error format."""
    headers = () if retry_after is None else (("retry-after-ms", str(int(retry_after * 1000))),)
    return Reply(
        status=status, error_message=message or f"scripted error {status}", headers=headers
    )


def hang(seconds: float = float("inf")) -> Reply:
    """Stall without answering (until the server stops, or for `seconds`, then fail with 504)."""
    return Reply(hang=seconds, status=504, error_message="scripted hang ended")


def drop() -> Reply:
    """Close the connection without answering."""
    return Reply(drop=True)


def slow(reply: Reply, chunk_delay: float, chunk_size: int = 4) -> Reply:
    """The same reply, streamed in small pieces with a pause between them."""
    return replace(reply, chunk_delay=chunk_delay, chunk_size=chunk_size)


# --- rules ------------------------------------------------------------------------------------


@dataclass
class Rule:
    agent: str | None = None
    brief_contains: str | None = None
    woken: bool | None = None
    step: int | None = None
    match: Callable[[ModelRequest], bool] | None = None
    replies: list[Reply | Responder] = field(default_factory=list)
    forever: Reply | Responder | None = None
    _owner: ScriptedModel | None = None

    def matches(self, req: ModelRequest) -> bool:
        if not self.replies and self.forever is None:
            return False
        if self.agent is not None and req.agent != self.agent:
            return False
        if self.brief_contains is not None and self.brief_contains not in req.brief:
            return False
        if self.woken is not None and req.woken != self.woken:
            return False
        if self.step is not None and req.step != self.step:
            return False
        return self.match is None or bool(self.match(req))

    def take(self) -> Reply | Responder:
        if self.replies:
            return self.replies.pop(0)
        assert self.forever is not None
        return self.forever

    def reply(self, *replies: Reply | Responder) -> ScriptedModel:
        """Answer the next matching requests with these, one each, in order."""
        self.replies.extend(replies)
        assert self._owner is not None
        return self._owner

    def always(self, reply: Reply | Responder) -> ScriptedModel:
        """Answer every matching request with this (after any one-off replies)."""
        self.forever = reply
        assert self._owner is not None
        return self._owner


class ScriptedModel:
    """Decides the answer to each request from rules; thread-safe."""

    def __init__(self, default: Responder | None = None, *, autopilot: bool = True):
        self.rules: list[Rule] = []
        self.default = default or (_autopilot if autopilot else None)
        self._lock = threading.Lock()

    def when(
        self,
        *,
        agent: str | None = None,
        brief_contains: str | None = None,
        woken: bool | None = None,
        step: int | None = None,
        match: Callable[[ModelRequest], bool] | None = None,
    ) -> Rule:
        """A new rule; every condition given must hold for it to answer."""
        rule = Rule(agent, brief_contains, woken, step, match, _owner=self)
        with self._lock:
            self.rules.append(rule)
        return rule

    def answer(self, req: ModelRequest) -> Reply:
        with self._lock:
            chosen: Reply | Responder | None = None
            for rule in self.rules:
                if rule.matches(req):
                    chosen = rule.take()
                    break
        if chosen is None:
            if self.default is None:
                return error(
                    400,
                    f"scripted model: no rule answers agent {req.agent!r} at step {req.step}",
                )
            chosen = self.default
        return chosen(req) if callable(chosen) else chosen

    def unused(self) -> list[Rule]:
        """Rules with one-off replies never given (a test usually expects none)."""
        with self._lock:
            return [r for r in self.rules if r.replies]


def _autopilot(req: ModelRequest) -> Reply:
    """A model that always does the minimum right thing: a manager hands one subtask to each
    report and ends its turn, then merges their results into a report; anyone else writes a
    deliverable and completes. One call per leaf task, two per manager task."""
    agent = req.agent or "agent"
    title = req.goal or "the task"
    if req.step > 0 and req.tool_results and any(r.startswith("error") for r in req.tool_results):
        return calls(fail("autopilot: a tool failed: " + req.tool_results[-1][:300]))
    if _TEAM_MANAGER in req.system:
        return _team_decision(req)
    reports = req.reports
    if reports and not req.woken:
        return calls(
            *[
                delegate(rid, f"{who.split(', ')[-1]} part: {title}", f"Your part of: {title}")
                for rid, who in reports
            ],
            text=f"Splitting '{title}' among {len(reports)} reports.",
        )
    if "files_write" not in req.tool_names:
        # Not allowed to write: deliver the result as text, as a careful model would.
        done = "merged the results for" if req.woken else "delivered"
        return calls(complete(f"{agent} {done} '{title}'.\n\n{req.brief[:2000]}"))
    path = f"{agent}/{_slug(title)}.md"
    if req.woken:
        body = f"# Report: {title}\n\n{req.brief}\n"
        summary = f"{agent} merged the results for '{title}' into {path}."
    else:
        body = f"# {title}\n\nDeliverable by {agent}.\n"
        summary = f"{agent} delivered '{title}' in {path}."
    return calls(write_file(path, body), complete(summary, [path]))


# How a team manager's turn reads (firm.teams.prompts): the team in the system prompt, the
# task list in the brief. The autopilot runs the first open task with the member it is meant
# for (or the first member), and stops when none is open.
_TEAM_MANAGER = ": the manager of the team "
_TEAM_MEMBER = re.compile(r"^- (?P<name>.+?) — ", re.MULTILINE)
_TEAM_TASK = re.compile(
    r"^- (?P<id>\S+) \[(?P<status>not started|failed [^\]]*may be tried again)\]:.*"
    r"(?:\n  Expected output:.*)?(?:\n  Meant for: (?P<agent>.+))?",
    re.MULTILINE,
)


def _team_decision(req: ModelRequest) -> Reply:
    team = req.system.partition("Your team:\n")[2]
    members = [m["name"] for m in _TEAM_MEMBER.finditer(team.partition("\n\n")[0])]
    task = _TEAM_TASK.search(req.brief.partition("Earlier turns of this run:")[0])
    if task is None or not members:
        decision = {"task_id": "", "agent_name": "", "action": "stop"}
    else:
        who = (task["agent"] or members[0]).strip()
        decision = {"task_id": task["id"], "agent_name": who, "action": "execute"}
    return text(json.dumps(decision))


def _slug(text: str, limit: int = 40) -> str:
    out = "".join(c if c.isalnum() else "-" for c in text.lower())
    while "--" in out:
        out = out.replace("--", "-")
    return out.strip("-")[:limit].rstrip("-") or "work"
