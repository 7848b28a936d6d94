"""Teams from YAML in the style CrewAI users know, and every mistake with its file and line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from firm import Team
from firm.teams.files import TeamFileError, load_team

AGENTS = """\
researcher:
  role: >
    {topic} Senior Data Researcher
  goal: >
    Uncover cutting-edge developments in {topic}
  backstory: >
    You're a seasoned researcher.
  verbose: true
  allow_delegation: false
reporting_analyst:
  role: Reporting Analyst
  goal: Turn research into reports
  llm: openai/gpt-4o
  tools: [files.write]
"""
TASKS = """\
research_task:
  description: >
    Conduct a thorough research about {topic}
  expected_output: >
    A list with 10 bullet points
  agent: researcher
reporting_task:
  description: Expand each topic into a section of a report
  expected_output: A report in markdown
  agent: reporting_analyst
  context: [research_task]
  output_file: report.md
"""
TEAM = """\
name: Research crew
process: hierarchical
manager_llm: gpt-4o
max_iter: 6
grant: [files.write]
inputs: {topic: AI agents}
agents: agents.yaml
tasks: tasks.yaml
"""


def write(folder: Path, **files: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("_yaml", ".yaml")).write_text(textwrap.dedent(text))


def problems(path: Path, **kwargs: object) -> list[str]:
    with pytest.raises(TeamFileError) as info:
        load_team(path, **kwargs)  # type: ignore[arg-type]
    return [str(p) for p in info.value.problems]


def test_a_team_file_with_crewai_agents_and_tasks_files(tmp_path: Path) -> None:
    write(tmp_path, team_yaml=TEAM, agents_yaml=AGENTS, tasks_yaml=TASKS)
    spec = load_team(tmp_path / "team.yaml").spec()
    assert (spec.name, spec.process, spec.max_iter, spec.grant) == (
        "Research crew",
        "hierarchical",
        6,
        ["files.write"],
    )
    researcher, analyst = spec.members
    assert (researcher.id, researcher.name) == ("researcher", "researcher")
    assert researcher.role == "AI agents Senior Data Researcher"
    assert researcher.goal == "Uncover cutting-edge developments in AI agents"
    assert analyst.llm is not None and analyst.llm.model == "gpt-4o"
    assert analyst.tools == ["files.write"]
    assert spec.manager is not None and spec.manager.llm is not None
    assert spec.manager.llm.model == "gpt-4o"
    research, report = spec.tasks
    assert research.description == "Conduct a thorough research about AI agents"
    assert (research.agent, report.agent, report.context) == (
        "researcher",
        "reporting_analyst",
        ["research_task"],
    )
    # Inputs given when running override the file's own.
    other = load_team(tmp_path / "team.yaml", inputs={"topic": "robots"}).spec()
    assert other.tasks[0].description == "Conduct a thorough research about robots"


def test_a_crewai_config_folder_is_a_sequential_team(tmp_path: Path) -> None:
    write(tmp_path / "config", agents_yaml=AGENTS, tasks_yaml=TASKS)
    team = Team.from_yaml(tmp_path / "config", inputs={"topic": "robots"}, max_iter=4)
    assert team.max_iter == 4
    spec = team.spec()
    assert spec.process == "sequential" and spec.name == "team"
    assert [t.id for t in spec.tasks] == ["research_task", "reporting_task"]


def test_agents_and_tasks_inline(tmp_path: Path) -> None:
    write(
        tmp_path,
        team_yaml="""\
        agents:
          writer: {role: Writer}
        tasks:
          draft: {description: Draft it, agent: writer}
          polish: {description: Polish it, agent: Writer}
        """,
    )
    spec = load_team(tmp_path / "team.yaml").spec()
    assert [(t.id, t.agent) for t in spec.tasks] == [("draft", "writer"), ("polish", "writer")]


def test_every_mistake_is_reported_at_once_with_file_line_and_field(tmp_path: Path) -> None:
    write(
        tmp_path,
        team_yaml=TEAM.replace("inputs: {topic: AI agents}\n", ""),
        agents_yaml="""\
        researcher:
          rol: Researcher
          goal: Find things
        writer:
          role: Writer
          max_iter: 0
        """,
        tasks_yaml="""\
        research_task:
          description: Research {topic}
          agent: researcher
        write_task:
          description: Write it up
          agent: writter
          context: [research, write_task]
        """,
    )
    found = problems(tmp_path / "team.yaml")
    agents, tasks = tmp_path / "agents.yaml", tmp_path / "tasks.yaml"
    assert found == [
        f"{agents}:1: researcher.role: is required",
        f"{agents}:2: researcher.rol: unknown key 'rol'",
        f"{agents}:6: writer.max_iter: Input should be greater than or equal to 1",
        f"{tasks}:2: research_task.description: the placeholder {{topic}} has no value "
        "(inputs given: none); add it under inputs: or pass --input topic=...",
        f"{tasks}:6: write_task.agent: 'writter' names no agent (known: researcher, writer)",
        f"{tasks}:7: write_task.context: 'research' is not another task of the team "
        "(tasks: research_task, write_task)",
        f"{tasks}:7: write_task.context: 'write_task' is not another task of the team "
        "(tasks: research_task, write_task)",
    ]


@pytest.mark.parametrize(
    ("team", "says"),
    [
        ("process: parallel\nagents: {a: {role: A}}\ntasks: {t: {description: T, agent: a}}\n",
         ":1: process: Input should be 'sequential' or 'hierarchical'"),
        ("agents: {a: {role: A}}\ntasks: {t: {description: T}}\n",
         ":2: tasks.t: a sequential team needs an agent: for every task"),
        ("agents: {a: {role: A}}\nagents: {b: {role: B}}\ntasks: {t: {description: T}}\n",
         ":2: agents: key 'agents' appears twice in the same mapping"),
        ("agents: {a: {role: A}\ntasks: {}\n", ":2: not valid YAML"),
        ("agents: agents.yaml\ntasks: {t: {description: T, agent: a}}\n",
         "agents.yaml: no such file"),
        ("agents: []\ntasks: {t: {description: T}}\n",
         ":1: agents: expected a mapping of agents by name, or the name of a file"),
        ("agents: {Bad Name: {role: A}}\ntasks: {t: {description: T}}\n",
         ":1: agents.Bad Name: 'Bad Name' is not usable as a name"),
        ("agents:\n  w: {role: W}\n  W: {role: V}\ntasks: {t: {description: T, agent: w}}\n",
         ":3: agents.W: 'W' and 'w' cannot be told apart"),
        ("- a list\n", ":1: expected a mapping with 'agents:' and 'tasks:'"),
        ("tasks: {t: {description: T}}\n", ":1: agents: is required"),
    ],
)  # fmt: skip
def test_a_bad_team_file_says_where(tmp_path: Path, team: str, says: str) -> None:
    (tmp_path / "team.yaml").write_text(team)
    found = problems(tmp_path / "team.yaml")
    assert any(says in p for p in found), found


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    assert problems(tmp_path / "nope.yaml") == [f"{tmp_path / 'nope.yaml'}: no such file"]
