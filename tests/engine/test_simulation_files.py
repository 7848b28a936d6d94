"""The simulation brain's deliverables follow each agent's tools: a file where it may write
one, the result as text where it may not."""

from __future__ import annotations

from pathlib import Path

from firm.api import Firm
from firm.org import parse_org

ORG = """\
company: Sim Co
agents:
  - {id: boss, name: Bo, title: Chief Executive Officer}
  - {id: dev, name: Dee, title: Backend Engineer, reports_to: boss}
  - {id: pen, name: Pen, title: Content Writer, reports_to: boss, tools: ["files.read"]}
"""


def test_a_leaf_without_files_write_delivers_text_and_one_with_it_a_file(tmp_path: Path) -> None:
    with Firm(tmp_path / "firm.db") as firm:
        root = firm.run(parse_org(ORG, "<t>"), "Launch", workspace=tmp_path / "ws", timeout=60)
        tasks = {t.assignee: t for t in firm.subtree(root.id)}
    assert root.status == "done", root.error
    dev, pen = tasks["dev"], tasks["pen"]
    assert dev.files and (tmp_path / "ws" / dev.files[0]).read_text().startswith(
        "# Backend implementation: Launch"
    )
    assert pen.files == () and pen.result == (
        "Content for 'Launch' (no file: this task may not write files)."
    )
    assert not (tmp_path / "ws" / "pen").exists()
    assert root.files[0] == f"boss/{root.id}-report.md"


def test_a_teams_deliverables_share_its_managers_folder(tmp_path: Path) -> None:
    chart = ORG + "  - {id: ops, name: Oz, title: Backend Engineer, reports_to: boss}\n"
    with Firm(tmp_path / "firm.db") as firm:
        root = firm.run(parse_org(chart, "<t>"), "Launch", workspace=tmp_path / "ws", timeout=60)
        tasks = {t.assignee: t for t in firm.subtree(root.id)}
    assert root.status == "done", root.error
    # One folder for the team, its report beside its members' files, each named by its author.
    for member in ("dev", "ops"):
        (path,) = tasks[member].files
        assert path.startswith(f"boss/{member}-{tasks[member].id}-")
        assert (tmp_path / "ws" / path).is_file()
    assert sorted(p.name for p in (tmp_path / "ws").iterdir()) == ["boss"]
    assert set(root.files) == {
        f"boss/{root.id}-report.md",
        *tasks["dev"].files,
        *tasks["ops"].files,
    }
    # A leaf with no manager (a company of one) writes into its own folder.
    with Firm(tmp_path / "one.db") as firm:
        solo = parse_org(
            "company: Solo\nagents:\n  - {id: dev, name: D, title: Backend Engineer}\n"
        )
        done = firm.run(solo, "Build", workspace=tmp_path / "ws1", timeout=60)
    assert done.status == "done", done.error
    assert done.files[0].startswith(f"dev/dev-{done.id}-")
