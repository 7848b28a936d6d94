"""What a team's run leaves as it starts and ends: its team_ended entry written with the
run's own ending, the chart each definition stores, and the response format a manager turn
starts with."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from firm import Agent, Task, Team, TeamFailed
from firm.api import Firm
from firm.endcall import with_calls
from firm.store.base import Event
from firm.teams.formats import mode_in_effect
from firm.teams.spec import DOWNGRADED
from firm.testing import ModelServer, ScriptedModel, text
from tests.teams.conftest import STOP, events, pick, two_task_team


def _root_entries(db: Path, run_id: str) -> list[Event]:
    # The ending's call read as its own entry, though it is written inside the ending.
    return [e for e in with_calls(events(db)) if e.task_id == run_id]


def test_team_ended_is_written_with_the_runs_completion(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(pick("research", "Researcher"), pick("write", "Writer"))
    model.when(agent="researcher").reply(text("Trends."))
    model.when(agent="writer").reply(text("Article."))
    team = two_task_team(db, tmp_path)
    assert team.start() == "Article."
    assert team.run_id is not None

    entries = _root_entries(db, team.run_id)
    kinds = [e.kind for e in entries]
    at = kinds.index("team_ended")
    # Right before the completion it reports, in the same write (one commit, one time).
    assert kinds[at : at + 3] == ["team_ended", "tool_call", "completed"]
    assert entries[at].data == {"status": "done", "reason": None}
    assert entries[at + 1].data["tool"] == "complete_task"
    assert entries[at].ts == entries[at + 2].ts
    # Two entries, one after the other: the call is in the completion (firm/endcall.py).
    assert [e.seq for e in entries[at : at + 3]] == [entries[at].seq] + [entries[at].seq + 1] * 2


def test_team_ended_is_written_with_the_runs_failure(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(STOP)
    team = two_task_team(db, tmp_path)
    with pytest.raises(TeamFailed):
        team.start()
    assert team.run_id is not None

    entries = _root_entries(db, team.run_id)
    kinds = [e.kind for e in entries]
    at = kinds.index("team_ended")
    assert kinds[at : at + 3] == ["team_ended", "tool_call", "failed"]
    assert entries[at].data["status"] == "failed"
    assert "stopped in turn 1" in entries[at].data["reason"]
    assert entries[at].ts == entries[at + 2].ts


def _team(db: Path, tmp_path: Path, tasks: int) -> Team:
    agents = [Agent(name=f"Worker {i}", role=f"Part {i}") for i in range(1, tasks + 1)]
    return Team(
        agents=agents,
        tasks=[Task(f"Do part {i}", agent=a, name=f"p{i}") for i, a in enumerate(agents, 1)],
        process="hierarchical",
        db=db,
        workspace=tmp_path / "ws",
    )


def test_each_definition_runs_with_its_own_chart(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    first = pick("p1", "Worker 1")
    model.when(agent="manager").reply(first, first, first, pick("p2", "Worker 2"))
    model.when(agent="worker-1").always(text("Part 1 done."))
    model.when(agent="worker-2").always(text("Part 2 done."))
    one, same, two = _team(db, tmp_path, 1), _team(db, tmp_path, 1), _team(db, tmp_path, 2)
    one.start()
    same.start(fresh=True)
    two.start()

    with Firm(db) as firm:
        charts = [firm.store.run(t.run_id or "").org_yaml for t in (one, same, two)]
    assert charts[0] == charts[1]
    assert "with 1 task(s)" in charts[0] and "worker-2" not in charts[0]
    assert "with 2 task(s)" in charts[2] and "worker-2" in charts[2]


class _Session(SimpleNamespace):
    """What mode_in_effect reads of a session: its task and the log of some tasks."""

    def events_of(self, ids: list[str], kinds: list[str] | None = None) -> list[Any]:
        self.read.append(ids)
        return [e for e in self.log if kinds is None or e.kind in kinds]


def _downgraded(task_id: str) -> Any:
    return SimpleNamespace(kind=DOWNGRADED, task_id=task_id, data={"to": "json_object"})


def test_a_first_turn_run_again_keeps_the_format_its_first_session_fell_back_to(
    tmp_path: Path,
) -> None:
    spec = _team(tmp_path / "firm.db", tmp_path, 1).spec()
    assert spec.manager_output == "json_schema"
    log = [_downgraded("turn-1")]

    # The run's first turn in its first session: nothing can have been logged before it.
    first = _Session(task_id="turn-1", task=SimpleNamespace(attempts=1), log=log, read=[])
    assert mode_in_effect(first, spec, ["turn-1"]) == "json_schema"  # type: ignore[arg-type]
    assert first.read == []
    # The same turn run again (its first session was interrupted after a fallback).
    again = _Session(task_id="turn-1", task=SimpleNamespace(attempts=2), log=log, read=[])
    assert mode_in_effect(again, spec, ["turn-1"]) == "json_object"  # type: ignore[arg-type]
    # A later turn reads what the turns before it fell back to.
    later = _Session(task_id="turn-2", task=SimpleNamespace(attempts=1), log=log, read=[])
    assert mode_in_effect(later, spec, ["turn-1", "turn-2"]) == "json_object"  # type: ignore[arg-type]
