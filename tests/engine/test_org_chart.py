"""Every org-chart mistake is reported with its file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from firm.errors import OrgChartError
from firm.org import load_org, top_agent
from tests.support import firm_cli


def problems_for(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "company.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(OrgChartError) as info:
        load_org(path)
    return [str(p) for p in info.value.problems]


def test_a_valid_chart_loads_with_its_structure(tmp_path: Path) -> None:
    path = tmp_path / "company.yaml"
    path.write_text(
        "company: Acme AI\n"
        "agents:\n"
        "  - {id: ceo, name: Ava, title: CEO}\n"
        "  - {id: cto, name: Ben, title: CTO, reports_to: ceo}\n"
        "  - {id: gabriel, name: Gabriel, title: Backend Engineer, reports_to: cto}\n"
    )
    org = load_org(path)
    assert [a.id for a in org.reports("ceo")] == ["cto"]
    assert org.chain_of_command("gabriel") == ["cto", "ceo"]
    assert top_agent(org).id == "ceo"
    assert org.tools_of("gabriel") == ["files.*"]


def test_unknown_key_names_file_line_and_field(tmp_path: Path) -> None:
    found = problems_for(
        tmp_path,
        "company: Acme\nagents:\n  - id: ceo\n    name: Ava\n    title: CEO\n    colour: blue\n",
    )
    assert found == [f"{tmp_path / 'company.yaml'}:6: agents[0].colour: unknown key 'colour'"]


def test_unknown_top_level_key(tmp_path: Path) -> None:
    found = problems_for(
        tmp_path, "company: A\nagnets: []\nagents:\n  - {id: a, name: A, title: T}\n"
    )
    assert any(":2: agnets: unknown key 'agnets'" in p for p in found)


def test_duplicate_ids(tmp_path: Path) -> None:
    found = problems_for(
        tmp_path,
        "company: A\n"
        "agents:\n"
        "  - {id: ceo, name: A, title: CEO}\n"
        "  - {id: cto, name: B, title: CTO, reports_to: ceo}\n"
        "  - {id: cto, name: C, title: CTO, reports_to: ceo}\n",
    )
    assert found == [
        f"{tmp_path / 'company.yaml'}:5: agents[2].id: duplicate agent id 'cto' "
        "(first defined at line 4)"
    ]


def test_reports_to_nobody(tmp_path: Path) -> None:
    found = problems_for(
        tmp_path,
        "company: A\n"
        "agents:\n"
        "  - {id: ceo, name: A, title: CEO}\n"
        "  - id: cto\n"
        "    name: B\n"
        "    title: CTO\n"
        "    reports_to: cfo\n",
    )
    assert found == [
        f"{tmp_path / 'company.yaml'}:7: agents[1].reports_to: 'cfo' names no agent "
        "(known: ceo, cto)"
    ]


def test_cycle(tmp_path: Path) -> None:
    found = problems_for(
        tmp_path,
        "company: A\n"
        "agents:\n"
        "  - {id: ceo, name: A, title: CEO}\n"
        "  - {id: a, name: A, title: T, reports_to: b}\n"
        "  - {id: b, name: B, title: T, reports_to: c}\n"
        "  - {id: c, name: C, title: T, reports_to: a}\n",
    )
    assert len(found) == 1
    assert ":4: agents[1].reports_to: reporting cycle: a → b → c → a" in found[0]


def test_self_report(tmp_path: Path) -> None:
    found = problems_for(
        tmp_path, "company: A\nagents:\n  - {id: ceo, name: A, title: CEO, reports_to: ceo}\n"
    )
    assert found == [
        f"{tmp_path / 'company.yaml'}:3: agents[0].reports_to: 'ceo' cannot report to itself"
    ]


def test_several_roots_need_a_target(tmp_path: Path) -> None:
    path = tmp_path / "company.yaml"
    path.write_text(
        "company: A\nagents:\n"
        "  - {id: ceo, name: A, title: CEO}\n"
        "  - {id: cfo, name: B, title: CFO}\n"
    )
    org = load_org(path)  # a chart with two tops is valid ...
    with pytest.raises(OrgChartError) as info:
        top_agent(org)  # ... but a goal must say which one it goes to
    message = str(info.value)
    assert "several top agents: ceo (line 3), cfo (line 4)" in message
    assert "--to" in message
    assert top_agent(org, "cfo").id == "cfo"
    with pytest.raises(OrgChartError, match="'cmo' names no agent"):
        top_agent(org, "cmo")


@pytest.mark.parametrize(
    ("snippet", "line", "field", "message"),
    [
        ("max_concurrent: 0\n", 1, "max_concurrent", "greater than or equal to 1"),
        ("max_concurrent: 100000\n", 1, "max_concurrent", "less than or equal to 1024"),
        ("max_concurrent: lots\n", 1, "max_concurrent", "valid integer"),
    ],
)
def test_absurd_company_values(
    tmp_path: Path, snippet: str, line: int, field: str, message: str
) -> None:
    found = problems_for(
        tmp_path, snippet + "company: A\nagents:\n  - {id: a, name: A, title: T}\n"
    )
    assert len(found) == 1
    assert f":{line}: {field}: " in found[0] and message in found[0]


def test_empty_and_invalid_agent_values(tmp_path: Path) -> None:
    found = problems_for(
        tmp_path,
        "company: A\nagents:\n  - id: Bad Id\n    name: ''\n    title: T\n    ttl: -5\n",
    )
    text = "\n".join(found)
    assert ":3: agents[0].id: 'Bad Id' is not a valid agent id" in text
    assert ":4: agents[0].name: String should have at least 1 character" in text
    assert ":6: agents[0].ttl: Input should be greater than 0" in text


def test_missing_required_fields(tmp_path: Path) -> None:
    found = problems_for(tmp_path, "company: A\nagents:\n  - {id: a, title: T}\n")
    assert found == [f"{tmp_path / 'company.yaml'}:3: agents[0].name: is required"]
    found = problems_for(tmp_path, "agents:\n  - {id: a, name: A, title: T}\n")
    assert found == [f"{tmp_path / 'company.yaml'}:1: company: is required"]


def test_no_agents(tmp_path: Path) -> None:
    found = problems_for(tmp_path, "company: A\nagents: []\n")
    assert len(found) == 1 and ":2: agents: List should have at least 1 item" in found[0]


def test_bad_tool_pattern(tmp_path: Path) -> None:
    found = problems_for(
        tmp_path,
        "company: A\nagents:\n  - id: a\n    name: A\n    title: T\n    tools: ['crm query']\n",
    )
    assert len(found) == 1 and ":6: agents[0].tools" in found[0]


def test_duplicate_yaml_key(tmp_path: Path) -> None:
    found = problems_for(
        tmp_path, "company: A\nagents:\n  - id: a\n    name: A\n    name: B\n    title: T\n"
    )
    assert found == [
        f"{tmp_path / 'company.yaml'}:5: agents[0].name: key 'name' appears twice "
        "in the same mapping"
    ]


def test_not_yaml_and_empty_file(tmp_path: Path) -> None:
    found = problems_for(tmp_path, "company: A\nagents:\n  - {id: a, name: A, title: T\n")
    assert len(found) == 1 and "not valid YAML" in found[0] and ":4" in found[0]
    assert "the file is empty" in problems_for(tmp_path, "")[0]
    assert "expected a mapping" in problems_for(tmp_path, "- just\n- a list\n")[0]


def test_several_problems_are_reported_together(tmp_path: Path) -> None:
    found = problems_for(
        tmp_path,
        "company: A\n"
        "agents:\n"
        "  - {id: ceo, name: A, title: CEO}\n"
        "  - {id: x, name: B, title: T, reports_to: nobody}\n"
        "  - {id: y, name: C, title: T, reports_to: ghost}\n",
    )
    assert len(found) == 2


def test_cli_reports_org_errors_in_one_line_each_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "company: A\nagents:\n  - {id: ceo, name: A, title: CEO}\n  - {id: x, name: B, title: T, "
        "reports_to: nobody, extra: 1}\n"
    )
    proc = firm_cli("run", "bad.yaml", "Do it", cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "error: bad.yaml:4: agents[1].extra: unknown key 'extra'" in proc.stderr
    missing = firm_cli("run", "nope.yaml", "Do it", cwd=tmp_path)
    assert missing.returncode == 2 and "nope.yaml: no such file" in missing.stderr


def test_field_problems_and_structure_problems_come_out_together(tmp_path: Path) -> None:
    found = problems_for(
        tmp_path,
        "company: A\n"
        "agents:\n"
        "  - {id: ceo, name: A, title: CEO, colour: red}\n"
        "  - {id: cto, name: B, title: CTO, reports_to: nobody}\n"
        "  - {id: cto, name: C, title: '', reports_to: ceo}\n",
    )
    text = "\n".join(found)
    assert ":3: agents[0].colour: unknown key 'colour'" in text
    assert ":4: agents[1].reports_to: 'nobody' names no agent" in text
    assert ":5: agents[2].id: duplicate agent id 'cto'" in text
    assert ":5: agents[2].title: String should have at least 1 character" in text
    assert [int(p.split(":")[1]) for p in found] == sorted(int(p.split(":")[1]) for p in found)


def test_nan_and_infinity_are_not_values(tmp_path: Path) -> None:
    found = problems_for(
        tmp_path,
        "company: A\nagents:\n"
        "  - {id: a, name: A, title: T, limits: {max_rows: .inf}, ttl: .nan}\n",
    )
    assert len(found) == 2 and all("finite number" in p for p in found)
