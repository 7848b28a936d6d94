"""A provider that refuses the manager's response format: the turn asks again with a weaker
one (json_schema, then json_object, then plain text), says so in the log, and the rest of
the run keeps to what worked."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from firm import TeamFailed
from firm.testing import ModelRequest, ModelServer, ScriptedModel, error, text
from tests.teams.conftest import events, pick, two_task_team

# What OpenAI-compatible servers say when they do not take a response format.
NO_SCHEMA = "Invalid parameter: 'response_format' of type 'json_schema' is not supported."
NO_FORMAT = "response_format is not supported by this server"


def asks_with(kind: str) -> Callable[[ModelRequest], bool]:
    def match(req: ModelRequest) -> bool:
        return (req.body.get("response_format") or {}).get("type") == kind

    return match


def formats(server: ModelServer) -> list[str]:
    """The response format of each manager request, in order ("text": none)."""
    return [
        (r.body.get("response_format") or {}).get("type", "text")
        for r in server.requests_for("manager")
    ]


def script_workers(model: ScriptedModel) -> None:
    model.when(agent="researcher").reply(text("Trends."))
    model.when(agent="writer").reply(text("Article."))


def test_a_server_without_json_schema_gets_json_mode_for_the_rest_of_the_run(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager", match=asks_with("json_schema")).always(error(400, NO_SCHEMA))
    model.when(agent="manager").reply(pick("research", "Researcher"), pick("write", "Writer"))
    script_workers(model)
    team = two_task_team(db, tmp_path)

    result = team.start(return_dict=True)
    assert result["status"] == "done"
    assert result["task_results"] == {"research": "Trends.", "write": "Article."}
    # Turn 1 asked again at once with JSON mode; turn 2 started there: one refusal in all.
    assert formats(server) == ["json_schema", "json_object", "json_object"]
    refused, retried, _ = server.requests_for("manager")
    assert retried.body["messages"][1:] == refused.body["messages"][1:]  # the same turn
    # Without a schema enforced by the API, the prompt spells it out.
    assert '"additionalProperties": false' in retried.request.system
    assert "additionalProperties" not in refused.request.system

    (downgrade,) = events(db, "manager_output_downgraded")
    assert (downgrade.data["turn"], downgrade.data["from"], downgrade.data["to"]) == (
        1,
        "json_schema",
        "json_object",
    )
    assert NO_SCHEMA in downgrade.data["error"]
    manager = result["manager"]
    assert manager["status"] == "completed"
    assert manager["response_format"] == "json_object"
    assert manager["turns"][0]["downgraded"] == [
        {"from": "json_schema", "to": "json_object", "error": downgrade.data["error"]}
    ]
    assert "downgraded" not in manager["turns"][1]
    assert events(db, "model_error") == []  # a refusal worked around is not a failure


def test_a_server_without_any_response_format_gets_plain_text(
    model: ScriptedModel,
    server: ModelServer,
    db: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for kind in ("json_schema", "json_object"):
        model.when(agent="manager", match=asks_with(kind)).always(error(400, NO_FORMAT))
    model.when(agent="manager").reply(pick("research", "Researcher"), pick("write", "Writer"))
    script_workers(model)
    team = two_task_team(db, tmp_path, output="verbose")

    assert team.start() == "Article."
    assert formats(server) == ["json_schema", "json_object", "text", "text"]
    last = server.requests_for("manager")[-1]
    assert "response_format" not in last.body
    assert '"required": ["task_id", "agent_name", "action"]' in last.request.system
    steps = [(e.data["from"], e.data["to"]) for e in events(db, "manager_output_downgraded")]
    assert steps == [("json_schema", "json_object"), ("json_object", "text")]
    assert team.result is not None and team.result["manager"]["response_format"] == "text"
    out = capsys.readouterr().out
    assert "[manager] turn 1: the model API refused json_schema answers; asking with " in out


def test_a_team_set_to_json_object_starts_there(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(pick("research", "Researcher"), pick("write", "Writer"))
    script_workers(model)
    two_task_team(db, tmp_path, manager_output="json_object").start()
    assert formats(server) == ["json_object", "json_object"]
    assert events(db, "manager_output_downgraded") == []


def test_a_server_that_refuses_even_plain_text_fails_the_run_with_its_reason(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").always(error(400, NO_FORMAT))
    team = two_task_team(db, tmp_path)
    with pytest.raises(TeamFailed) as info:
        team.start()
    assert formats(server) == ["json_schema", "json_object", "text"]  # then it gives up
    assert "the manager failed in turn 1" in info.value.result["error"]
    assert NO_FORMAT in info.value.result["error"]
    assert info.value.result["manager"]["status"] == "failed"
