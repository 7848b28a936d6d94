"""A team's model calls reuse the process's connections: across the sessions of a run and
across runs (every start() builds its brain anew), one call at a time goes over one
connection. Counted by the scripted server, which sees each connection's client address."""

from __future__ import annotations

from pathlib import Path

from firm import Team
from firm.testing import ModelServer, ScriptedModel, text
from tests.teams.conftest import two_task_team


def test_runs_one_after_another_call_over_one_connection(
    server: ModelServer, model: ScriptedModel, db: Path, tmp_path: Path
) -> None:
    model.when().always(text("done"))
    team: Team = two_task_team(db, tmp_path, process="sequential")
    assert team.start() == "done"
    assert team.start(fresh=True) == "done"  # a new run, a new brain: the same pool
    requests = server.requests
    assert len(requests) == 4  # two tasks, two runs
    assert len({r.peer for r in requests}) == 1
