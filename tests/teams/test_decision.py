"""The manager's answer, judged: lenient-but-exact names, and every way to get it wrong."""

from __future__ import annotations

import json

import pytest

from firm.teams.decision import DECISION_SCHEMA, Choices, judge, response_format

CHOICES = Choices(
    tasks={"research": "done", "write": "pending", "review": "excluded", "Final-Edit": "pending"},
    members={"researcher": "Researcher", "senior-writer": "Senior Writer"},
    manager_id="manager",
    manager_name="Manager",
    own_turn="T-0000abcd",
    failures={"review": 4},
)


def answer(task_id: object, agent_name: object, action: object = "execute") -> str:
    return json.dumps({"task_id": task_id, "agent_name": agent_name, "action": action})


@pytest.mark.parametrize(
    "name",
    ["Senior Writer", "senior writer", "  SENIOR   writer ", '"Senior Writer"', "'senior writer'",
     "`Senior Writer`", "“Senior Writer”", "Senior\tWriter"],
)  # fmt: skip
def test_names_match_after_case_spacing_and_quotes_only(name: str) -> None:
    verdict = judge(answer("write", name), CHOICES)
    assert verdict.kind == "execute"
    assert (verdict.task_id, verdict.agent_id, verdict.agent_name) == (
        "write",
        "senior-writer",
        "Senior Writer",
    )


@pytest.mark.parametrize(
    "name",
    ["Senior", "Writer", "SeniorWriter", "Senior Writers", "the Senior Writer", "senior_writer",
     "senior-writer", ""],
)  # fmt: skip
def test_nothing_is_guessed(name: str) -> None:
    # "senior-writer" is the member's id in the generated chart: names only, no alias.
    verdict = judge(answer("write", name), CHOICES)
    assert verdict.kind == "rejected"
    assert f"there is no team member {name!r}" in verdict.reason
    assert "Team members: Researcher, Senior Writer." in verdict.reason


def test_task_ids_resolve_the_same_way() -> None:
    assert judge(answer(' "final-edit" ', "Researcher"), CHOICES).task_id == "Final-Edit"
    verdict = judge(answer("final edit", "Researcher"), CHOICES)
    assert verdict.kind == "rejected"
    assert "there is no task 'final edit'" in verdict.reason
    # The valid choices are the tasks still open: not the done one, not the excluded one.
    assert "Tasks you can choose: write, Final-Edit." in verdict.reason


@pytest.mark.parametrize("me", ["Manager", "manager", " 'MANAGER' ", "MANAGER"])
def test_the_manager_never_picks_itself(me: str) -> None:
    verdict = judge(answer("write", me), CHOICES)
    assert verdict.kind == "rejected"
    assert "you are the manager" in verdict.reason


def test_the_manager_never_picks_its_own_turn() -> None:
    verdict = judge(answer("t-0000ABCD", "Researcher"), CHOICES)
    assert verdict.kind == "rejected"
    assert "T-0000abcd is your own turn" in verdict.reason


def test_a_done_task_is_a_reselection_not_a_run() -> None:
    verdict = judge(answer("Research", "researcher"), CHOICES)
    assert verdict.kind == "reselected"
    assert verdict.accepted
    assert verdict.reason == "research is already done; it was not run again"


def test_an_excluded_task_is_rejected() -> None:
    verdict = judge(answer("review", "Researcher"), CHOICES)
    assert verdict.kind == "rejected"
    assert "task review is excluded (it failed 4 times" in verdict.reason


def test_stop_needs_nothing_else() -> None:
    assert judge(answer("", "", "stop"), CHOICES).kind == "stop"
    assert judge(answer(None, None, " STOP "), CHOICES).kind == "stop"


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("I think the writer should go next.", "not a JSON object"),
        ('{"task_id": "write", "agent_name": "Researcher", "action": "execute"', "not valid JSON"),
        ('{"task_id": "write", "action": "execute"}', "lacks 'agent_name'"),
        (answer("write", "Researcher", "delegate"), '\'action\' must be "execute" or "stop"'),
        (answer(["write"], "Researcher"), "'task_id' must be a string"),
        (answer("write", True), "'agent_name' must be a string"),
    ],
)
def test_malformed_answers_say_what_is_wrong(raw: str, says: str) -> None:
    verdict = judge(raw, CHOICES)
    assert verdict.kind == "rejected"
    assert says in verdict.reason
    assert "Tasks you can choose:" in verdict.reason


@pytest.mark.parametrize(
    "extra",
    [{"why": "x"}, {"reasoning": ""}, {"task_id ": "write"}, {"confidence": 0.9}],
)
def test_an_extra_key_is_a_rejection(extra: dict[str, object]) -> None:
    data = {"task_id": "write", "agent_name": "Researcher", "action": "execute", **extra}
    verdict = judge(json.dumps(data), CHOICES)
    assert verdict.kind == "rejected"
    (key,) = extra
    assert f"your answer has {key!r}, which the schema does not allow" in verdict.reason
    assert "Tasks you can choose: write, Final-Edit." in verdict.reason
    stop = {"task_id": "", "agent_name": "", "action": "stop", **extra}
    assert judge(json.dumps(stop), CHOICES).kind == "rejected"  # a stop too


@pytest.mark.parametrize(
    "raw",
    [
        '```json\n{"task_id": "write", "agent_name": "Researcher", "action": "execute"}\n```',
        '```\n{"task_id": "write", "agent_name": "Researcher", "action": "execute"}\n```',
        '```JSON {"task_id": "write", "agent_name": "Researcher", "action": "execute"}```',
        '  {"task_id": "write", "agent_name": "Researcher", "action": "execute"}\n',
    ],
)
def test_a_code_fence_around_the_object_is_tolerated(raw: str) -> None:
    assert judge(raw, CHOICES).kind == "execute"


@pytest.mark.parametrize(
    "raw",
    [
        'My choice: {"task_id": "write", "agent_name": "Researcher", "action": "execute"}',
        '{"task_id": "write", "agent_name": "Researcher", "action": "execute"} (writer is busy)',
        'Sure!\n```json\n{"task_id": "write", "agent_name": "Researcher", "action": "execute"}'
        "\n```",
    ],
)
def test_text_around_the_object_is_a_rejection(raw: str) -> None:
    verdict = judge(raw, CHOICES)
    assert verdict.kind == "rejected"
    assert "must be the JSON object alone, with no text around it" in verdict.reason


def test_the_response_format_is_a_strict_closed_schema() -> None:
    fmt = response_format("json_schema")
    assert fmt is not None and fmt["type"] == "json_schema"
    assert fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema is DECISION_SCHEMA
    assert schema["additionalProperties"] is False
    assert (
        set(schema["required"])
        == set(schema["properties"])
        == {
            "task_id",
            "agent_name",
            "action",
        }
    )
    assert schema["properties"]["action"]["enum"] == ["execute", "stop"]
    assert response_format("json_object") == {"type": "json_object"}
    assert response_format("text") is None
