"""User tools: a module named in the org chart, sync and async, with schemas from type hints."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from firm.api import Firm
from firm.engine.company import build_registry
from firm.errors import FirmError
from firm.org import parse_org
from tests.authority.scripted import ScriptedBrain, delegate, open_firm, run_company, write_company

ORG = """\
company: Tools Co
tool_modules: [{module}]
agents:
  - {{id: boss, name: Bo, title: Manager, tools: ["crm.*", "files.*"]}}
  - {{id: analyst, name: Al, title: Analyst, reports_to: boss, tools: ["crm.*"]}}
"""


def test_a_tool_module_by_path_registers_sync_and_async_tools(tmp_path: Path) -> None:
    company = write_company(tmp_path / "co", ORG.format(module="crm_tools.py"))
    org = parse_org(company.org_path.read_text(), str(company.org_path))
    registry = build_registry(org, company.folder)
    query, score = registry.find("crm.query"), registry.find("crm_score")
    assert query is not None and score is not None
    assert registry.find("crm_query") is query  # the model-facing name has underscores
    assert (query.model_name, score.model_name) == ("crm_query", "crm_score")
    assert query.limits == {"rows": "max_rows"} and not query.is_async and score.is_async
    assert query.description == "Query customers of a segment."
    schema = query.parameters_schema()
    assert schema["properties"]["segment"] == {"type": "string"}
    assert schema["properties"]["rows"]["type"] == "integer"
    assert schema["required"] == ["segment"] and schema["additionalProperties"] is False
    weights = score.parameters_schema()["properties"]["weights"]
    assert {"type": "array", "items": {"type": "number"}} in weights["anyOf"]


def test_user_tools_run_through_a_session_sync_and_async(tmp_path: Path) -> None:
    company = write_company(tmp_path / "co", ORG.format(module="crm_tools.py"))
    brain = ScriptedBrain(
        {
            "boss": [delegate("analyst", "Score Acme")],
            "analyst": [
                ("crm_score", {"customer": "acme", "weights": [0.5, 2]}),
                ("crm_query", json.dumps({"segment": "smb", "rows": 2})),  # a model's JSON text
                ("crm_query", {"segment": "smb", "rows": "many"}),
                ("crm_query", {"segment": "smb", "limit": 3}),
                ("crm_nothing", {}),
            ],
        }
    )
    with open_firm(tmp_path, brain) as firm:
        run_company(firm, company)
    score = brain.results("analyst", "crm_score")[0]
    assert score.ok and json.loads(score.content) == {"customer": "acme", "score": 2.5}
    good, wrong_type, unknown_arg = brain.results("analyst", "crm_query")
    assert good.ok and good.content == "2 customers in smb"
    assert not wrong_type.ok and "argument 'rows'" in wrong_type.content
    assert not unknown_arg.ok and "unexpected argument 'limit'" in unknown_arg.content
    assert "there is no tool 'crm_nothing'" in brain.results("analyst", "crm_nothing")[0].content
    assert company.ran() == ["crm.score", "crm.query"]


def test_a_tool_module_by_dotted_name_is_found_beside_the_org_chart(tmp_path: Path) -> None:
    # A name unique to this test: imported modules stay in sys.modules.
    module = f"acme_tools_{tmp_path.name.replace('-', '_')}"
    company = write_company(tmp_path / "co", ORG.format(module=module), module=f"{module}.py")
    brain = ScriptedBrain({"boss": [("crm.query", {"segment": "x", "rows": 1})]})
    with open_firm(tmp_path, brain) as firm:
        run_company(firm, company)
    assert brain.results("boss", "crm.query")[0].ok
    assert module in sys.modules


def test_async_tools_also_work_when_the_brain_runs_in_an_event_loop(tmp_path: Path) -> None:
    import asyncio

    company = write_company(tmp_path / "co", ORG.format(module="crm_tools.py"))

    def inside_a_loop(session) -> None:
        async def main() -> None:
            brain.call(session, "crm.score", {"customer": "acme"})

        asyncio.run(main())

    brain = ScriptedBrain({"boss": inside_a_loop})
    with open_firm(tmp_path, brain) as firm:
        run_company(firm, company)
    assert brain.results("boss", "crm.score")[0].ok


def test_a_tool_that_raises_is_a_tool_error_not_a_crash(tmp_path: Path) -> None:
    folder = tmp_path / "co"
    folder.mkdir()
    (folder / "flaky.py").write_text(
        textwrap.dedent(
            """\
            import firm

            @firm.tool("flaky.call")
            def flaky_call(n: int) -> str:
                return str(10 // n)
            """
        )
    )
    company = write_company(
        folder,
        """\
        company: Flaky Co
        tool_modules: [flaky.py]
        agents:
          - {id: solo, name: So, title: Analyst, tools: ["flaky.*"]}
        """,
    )
    brain = ScriptedBrain({"solo": [("flaky_call", {"n": 0}), ("flaky_call", {"n": 5})]})
    with open_firm(tmp_path, brain) as firm:
        root = run_company(firm, company)
    broken, fine = brain.results("solo", "flaky_call")
    assert not broken.ok and "ZeroDivisionError" in broken.content
    assert fine.ok and fine.content == "2"
    assert root.status == "done"


@pytest.mark.parametrize(
    ("module", "body", "message"),
    [
        ("missing.py", None, "no such file"),
        ("broken.py", "import nowhere_to_be_found\n", "failed to import"),
        ("no_such_module_xyz", None, "cannot be imported"),
        (
            "clash.py",
            "import firm\n@firm.tool('files.read')\ndef r(path: str) -> str:\n    return ''\n",
            "two tools are named 'files.read'",
        ),
    ],
)
def test_a_bad_tool_module_is_a_clear_error_at_submit(
    tmp_path: Path, module: str, body: str | None, message: str
) -> None:
    company = write_company(tmp_path / "co", ORG.format(module=module), module="crm_tools.py")
    if body is not None:
        (company.folder / module).write_text(body)
    with Firm(tmp_path / "firm.db") as firm, pytest.raises(FirmError, match=message):
        firm.submit(company.org_path, "x", workspace=tmp_path / "ws")
    with Firm(tmp_path / "firm.db") as firm:
        assert firm.tasks() == []  # nothing was created
