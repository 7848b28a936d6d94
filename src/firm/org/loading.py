"""Loading an org chart from YAML: every problem found up front and reported with its file,
line and field, so a person fixing a chart sees all mistakes at once rather than one per
attempt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    ValidationError,
)

from firm.errors import OrgChartError, Problem, some_of
from firm.org.chart import AgentSpec, OrgChart
from firm.yamlproblems import YamlPath, duplicate_keys, line_map, pydantic_problems
from firm.yamltext import load_plain


def _reporting_lines(data: Any) -> list[tuple[int, str, str | None]]:
    """(index, id, reports_to) of every agent entry whose id is usable, read from the raw
    data, so the structure is checked even when other fields have problems of their own."""
    agents = data.get("agents") if isinstance(data, dict) else None
    out: list[tuple[int, str, str | None]] = []
    for i, a in enumerate(agents if isinstance(agents, list) else []):
        if not isinstance(a, dict) or not isinstance(a.get("id"), str):
            continue
        boss = a.get("reports_to")
        out.append((i, a["id"].strip(), boss.strip() if isinstance(boss, str) else None))
    return out


def _structure_problems(
    entries: list[tuple[int, str, str | None]], file: str, lines: dict[YamlPath, int]
) -> list[Problem]:
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, agent_id, _ in entries:
        if agent_id in seen:
            first = lines.get(("agents", seen[agent_id], "id"))
            problems.append(
                Problem(
                    file,
                    lines.get(("agents", i, "id")),
                    f"agents[{i}].id",
                    f"duplicate agent id {agent_id!r} (first defined at line {first})",
                )
            )
        else:
            seen[agent_id] = i
    known = sorted(seen)
    for i, agent_id, boss in entries:
        if boss is None:
            continue
        if boss == agent_id:
            problems.append(
                Problem(
                    file,
                    lines.get(("agents", i, "reports_to")),
                    f"agents[{i}].reports_to",
                    f"{agent_id!r} cannot report to itself",
                )
            )
        elif boss not in seen:
            problems.append(
                Problem(
                    file,
                    lines.get(("agents", i, "reports_to")),
                    f"agents[{i}].reports_to",
                    f"{boss!r} names no agent (known: {some_of(known)})",
                )
            )
    if problems:
        return problems
    # Cycles: follow reports_to from each agent; a walk that revisits an agent is a loop.
    boss_of = {agent_id: boss for _, agent_id, boss in entries}
    reported: set[frozenset[str]] = set()
    for _, agent_id, _ in entries:
        path: list[str] = []
        cur: str | None = agent_id
        while cur is not None and cur not in path:
            path.append(cur)
            cur = boss_of.get(cur)
        if cur is not None:
            loop = path[path.index(cur) :]
            if frozenset(loop) in reported:
                continue
            reported.add(frozenset(loop))
            i = seen[loop[0]]
            problems.append(
                Problem(
                    file,
                    lines.get(("agents", i, "reports_to")),
                    f"agents[{i}].reports_to",
                    "reporting cycle: " + " → ".join([*loop, loop[0]]),
                )
            )
    return problems


def _approval_agent_problems(
    data: dict[str, Any], file: str, lines: dict[YamlPath, int]
) -> list[Problem]:
    """An `approvals:` rule's `agents:` must name agents of the chart."""
    known = {agent_id for _, agent_id, _ in _reporting_lines(data)}
    rules = data.get("approvals")
    problems: list[Problem] = []
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        named = rule.get("agents") if isinstance(rule, dict) else None
        for j, agent_id in enumerate(named if isinstance(named, list) else []):
            if isinstance(agent_id, str) and agent_id not in known:
                problems.append(
                    Problem(
                        file,
                        lines.get(("approvals", i, "agents", j))
                        or lines.get(("approvals", i, "agents")),
                        f"approvals[{i}].agents[{j}]",
                        f"{agent_id!r} names no agent (known: {some_of(sorted(known))})",
                    )
                )
    return problems


def parse_org(text: str, file: str = "<org chart>") -> OrgChart:
    """Parse and validate an org chart from YAML text; every problem is reported at once."""
    try:
        data, node = load_plain(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        reason = getattr(exc, "problem", None) or str(exc)
        raise OrgChartError([Problem(file, line, "", f"not valid YAML: {reason}")]) from None
    if data is None:
        raise OrgChartError(
            [Problem(file, 1, "", "the file is empty; expected 'company:' and 'agents:'")]
        )
    if not isinstance(data, dict):
        raise OrgChartError(
            [Problem(file, 1, "", "expected a mapping with 'company:' and 'agents:'")]
        )
    lines = line_map(node)
    problems = duplicate_keys(node, file)
    try:
        org: OrgChart | None = OrgChart.model_validate(data)
    except ValidationError as err:
        org = None
        problems.extend(pydantic_problems(err, file, lines))
    # Who reports to whom is checked on the raw entries too, so one run reports it all.
    problems.extend(_structure_problems(_reporting_lines(data), file, lines))
    problems.extend(_approval_agent_problems(data, file, lines))
    if problems or org is None:
        raise OrgChartError(sorted(problems, key=lambda p: (p.line or 0, p.field)))
    org._lines = lines
    org._file = file
    org._text = text
    return org


def load_org(path: str | Path) -> OrgChart:
    """Load and validate an org chart file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise OrgChartError([Problem(str(p), None, "", "no such file")]) from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise OrgChartError([Problem(str(p), None, "", f"cannot read: {exc}")]) from None
    return parse_org(text, str(p))


def top_agent(org: OrgChart, to: str | None = None) -> AgentSpec:
    """The agent a goal goes to: the one named, else the single root of the chart."""
    file, lines = org._file, org._lines
    if to is not None:
        if not org.has_agent(to):
            known = some_of(a.id for a in org.agents)
            raise OrgChartError(
                [Problem(file, None, "--to", f"{to!r} names no agent (known: {known})")]
            )
        return org.agent(to)
    roots = org.roots()
    if len(roots) > 1:
        index = {a.id: i for i, a in enumerate(org.agents)}
        where = some_of(f"{r.id} (line {lines.get(('agents', index[r.id], 'id'))})" for r in roots)
        raise OrgChartError(
            [
                Problem(
                    file,
                    lines.get(("agents",)),
                    "agents",
                    f"several top agents: {where}; name the one the goal goes to with --to",
                )
            ]
        )
    return roots[0]
