"""The tools a session is offered are worked out once per agent and grant scopes, and that
sharing never shows an agent a tool its own task's hooks would hide."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from firm.engine.company import Company
from firm.engine.runs import prepare_run
from firm.org import parse_org
from firm.tasks import Status, Task
from firm.tools.registry import ToolDef, make_tool

CHART = """\
company: Offers Co
agents:
  - {id: boss, name: B, title: CEO}
  - {id: dev, name: D, title: Engineer, reports_to: boss, tools: ["files.*", "net.*"]}
"""


def company(tmp_path: Path) -> Company:
    org = parse_org(CHART, "<offers>")
    return prepare_run(org, "Ship it", workspace=tmp_path / "ws").company


def task(title: str, assignee: str = "dev", scopes: tuple[str, ...] = ("*",)) -> Task:
    grant = {"scopes": list(scopes), "limits": {}, "expires_at": None, "budget_tokens": None}
    return Task(
        id=f"T-{title}",
        root_id="T-root",
        parent_id="T-root",
        title=title,
        description="",
        status=Status.IN_PROGRESS,
        assignee=assignee,
        created_by="boss",
        grant=grant,
    )


def names(tools: tuple[ToolDef, ...]) -> list[str]:
    return sorted(t.name for t in tools)


def test_tasks_of_one_agent_and_scopes_are_offered_the_same_tools(tmp_path: Path) -> None:
    c = company(tmp_path)
    first = c.offered(task("one"), c.registry)
    assert names(first) == ["complete_task", "fail_task", "files.list", "files.read", "files.write"]
    assert names(c.offered(task("two"), c.registry)) == names(first)
    # A manager is offered delegation; a narrower grant hides what it leaves out.
    assert "delegate_task" in names(c.offered(task("plan", "boss"), c.registry))
    narrow = c.offered(task("three", scopes=("files.read",)), c.registry)
    assert names(narrow) == ["complete_task", "fail_task", "files.read"]


def test_a_policy_that_looks_at_each_task_is_asked_for_each_task(tmp_path: Path) -> None:
    class ReadOnlyReviews(Company):
        def offers(self, task: Task, tool: ToolDef) -> bool:
            if task.title.startswith("review") and tool.name == "files.write":
                return False
            return super().offers(task, tool)

    base = company(tmp_path)
    c = ReadOnlyReviews(**{f.name: getattr(base, f.name) for f in fields(base)})
    assert "files.write" in names(c.offered(task("build"), c.registry))
    assert "files.write" not in names(c.offered(task("review it"), c.registry))
    assert "files.write" in names(c.offered(task("build again"), c.registry))


def test_a_tool_added_to_the_company_is_offered_to_the_next_session(tmp_path: Path) -> None:
    c = company(tmp_path)
    before = c.offered(task("one"), c.registry)

    def ping() -> str:
        return "pong"

    c.registry.add(make_tool("net.ping", ping))
    after = c.offered(task("two"), c.registry)
    assert "net.ping" not in names(before)
    assert "net.ping" in names(after)
