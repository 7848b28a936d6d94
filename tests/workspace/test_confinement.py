"""Invariant 10: the file tools cannot reach outside the company workspace, nor exhaust it.

The escape corpus runs against every file tool — directly against the Workspace, and through
a session the way a model's call arrives — and nothing outside the workspace is read, written
or created.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from firm.errors import WorkspaceError
from firm.tools.workspace import Limits, Workspace

Tool = Callable[[Workspace, str], object]
TOOLS: dict[str, Tool] = {
    "files.read": lambda ws, p: ws.read(p),
    "files.write": lambda ws, p: ws.write(p, "pwned"),
    "files.list": lambda ws, p: ws.list(p),
    # Not a tool: what a brain that knows its next files calls (brains/simulation.py).
    "make_folder": lambda ws, p: ws.make_folder(p, files=2),
}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the workspace holding a secret; nothing may touch it."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("the crown jewels")
    return out


@pytest.fixture
def ws(tmp_path: Path, outside: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "docs").mkdir()
    (root / "docs" / "plan.md").write_text("# plan")
    os.symlink(outside, root / "door")  # a folder symlink leading out
    os.symlink(outside / "secret.txt", root / "docs" / "jewels.md")  # a file symlink out
    os.symlink(root / "docs", root / "shortcut")  # a symlink that stays inside: fine
    return Workspace(root)


ESCAPES = [
    ("../outside/secret.txt", "leaves the workspace"),
    ("docs/../../outside/secret.txt", "leaves the workspace"),
    ("..", "leaves the workspace"),
    ("/etc/passwd", "is absolute"),
    ("C:\\Windows\\win.ini", "is absolute"),
    ("~/.ssh/id_rsa", "is absolute"),
    ("door/secret.txt", "symlink that points outside"),
    ("docs/jewels.md", "symlink that points outside"),
    ("door", "symlink that points outside"),
    ("docs/plan.md\x00.txt", "NUL byte"),
    ("a" * 300 + ".md", "longer than 255 bytes"),
    ("/".join(["d"] * 40) + "/f.md", "nested 41 deep"),
    ("x/" * 600 + "f", "characters long"),
    ("", "empty"),
]


@pytest.mark.parametrize("tool", sorted(TOOLS))
@pytest.mark.parametrize(("path", "why"), ESCAPES, ids=[e[1] + ":" + e[0][:20] for e in ESCAPES])
def test_every_file_tool_refuses_the_escape_corpus(
    ws: Workspace, outside: Path, tool: str, path: str, why: str
) -> None:
    before = {p.name: p.read_text() for p in outside.iterdir()}
    with pytest.raises(WorkspaceError, match=why.replace("(", r"\(")):
        TOOLS[tool](ws, path)
    assert {p.name: p.read_text() for p in outside.iterdir()} == before  # untouched


def test_symlinks_that_stay_inside_are_followed(ws: Workspace) -> None:
    assert ws.read("shortcut/plan.md") == "# plan"
    ws.write("shortcut/notes.md", "ok")
    assert (ws.root / "docs" / "notes.md").read_text() == "ok"


def test_devices_and_fifos_are_never_opened(ws: Workspace) -> None:
    os.mkfifo(ws.root / "pipe")
    # A reader opening a FIFO would block forever: the check comes before any open.
    with pytest.raises(WorkspaceError, match="not a regular file"):
        ws.read("pipe")
    with pytest.raises(WorkspaceError, match="not a regular file"):
        ws.write("pipe", "x")
    try:
        os.mknod(ws.root / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs privileges this run does not have")
    with pytest.raises(WorkspaceError, match="not a regular file"):
        ws.read("null")
    with pytest.raises(WorkspaceError, match="not a regular file"):
        ws.write("null", "x")


def test_a_folder_is_not_a_file(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="is a folder"):
        ws.read("docs")
    with pytest.raises(WorkspaceError, match="is a file"):
        ws.list("docs/plan.md")
    with pytest.raises(WorkspaceError, match="workspace folder itself"):
        ws.write(".", "x")


def test_writes_make_their_folders_and_refuse_a_file_in_a_folder_s_place(ws: Workspace) -> None:
    ws.write("new/deeper/still/f.md", "a")  # three folders made
    ws.write("new/g.md", "b")  # the folder is there
    ws.write("fresh/h.md", "c")  # one folder made
    assert ws.read("new/deeper/still/f.md") + ws.read("new/g.md") + ws.read("fresh/h.md") == "abc"
    os.remove(ws.root / "fresh" / "h.md")
    os.rmdir(ws.root / "fresh")
    ws.write("fresh/h.md", "d")  # a folder removed since is made again
    assert ws.read("fresh/h.md") == "d"
    for path in ("docs/plan.md/x.md", "docs/plan.md/deeper/x.md"):
        for tool in TOOLS.values():
            with pytest.raises(WorkspaceError, match="is a file, not a folder"):
                tool(ws, path)
    assert (ws.root / "docs" / "plan.md").read_text() == "# plan"


def test_size_caps_and_ranged_reads(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "w", Limits(max_write_bytes=1000, max_read_bytes=100))
    with pytest.raises(WorkspaceError, match="over the write limit of 1000"):
        ws.write("big.md", "x" * 1001)
    assert not (ws.root / "big.md").exists()
    ws.write("big.md", "0123456789" * 50)  # 500 bytes: written, but over the read cap
    with pytest.raises(WorkspaceError, match=r"over the read limit of 100.*offset and length"):
        ws.read("big.md")
    assert ws.read("big.md", offset=10, length=5) == "01234"
    assert ws.read("big.md", offset=495) == "56789"
    with pytest.raises(WorkspaceError, match="over the read limit"):
        ws.read("big.md", offset=0, length=101)
    with pytest.raises(WorkspaceError, match="must not be negative"):
        ws.read("big.md", offset=-1, length=5)


def test_too_many_files(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "w", Limits(max_files=3))
    for i in range(3):
        ws.write(f"f{i}.md", "x")
    ws.write("f0.md", "rewriting an existing file is not a new one")
    with pytest.raises(WorkspaceError, match="holds 3 files, the limit"):
        ws.write("f3.md", "x")
    assert sorted(ws.list()) == ["f0.md", "f1.md", "f2.md"]


def test_a_write_that_fails_midway_leaves_the_old_file_whole(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(*_a: object) -> None:
        raise OSError("disk pulled out")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk pulled out"):
        ws.write("docs/plan.md", "# a new plan that never lands")
    assert (ws.root / "docs" / "plan.md").read_text() == "# plan"
    assert not [p for p in (ws.root / "docs").iterdir() if p.name.startswith(".firm-")]


def test_listing_hides_temporary_files_and_stays_inside(ws: Workspace) -> None:
    (ws.root / "docs" / ".firm-123.tmp").write_text("half")
    assert ws.list() == ["docs/plan.md"]  # no temp file; symlinked entries are not followed out


def test_through_a_session_an_escape_is_an_error_the_model_reads_and_the_log_keeps(
    tmp_path: Path, outside: Path
) -> None:
    from firm.engine import Engine
    from firm.org import parse_org
    from firm.session import Session
    from firm.store import open_store
    from firm.testing import FunctionBrain

    answers: list[tuple[bool, str]] = []

    def nosy(session: Session) -> str:
        for tool, args in [
            ("files_read", {"path": "../outside/secret.txt"}),
            ("files_write", {"path": "/tmp/owned.txt", "content": "x"}),
            ("files_list", {"path": "../.."}),
            ("files_write", {"path": "notes/ok.md", "content": "fine"}),
        ]:
            result = session.call(tool, args)
            answers.append((result.ok, result.content))
        session.call("complete_task", {"result": "tried"})
        return ""

    org = parse_org("company: C\nagents:\n  - {id: a, name: A, title: Analyst}\n", "<t>")
    store = open_store(tmp_path / "s.db")
    with Engine(store, brain=FunctionBrain({"a": nosy}), heartbeat=0.2) as engine:
        root = engine.submit(org, "Look around", workspace=tmp_path / "ws")
        assert engine.run_until(root.id, timeout=30).status.value == "done"
    assert [ok for ok, _ in answers] == [False, False, False, True]
    assert "leaves the workspace" in answers[0][1]
    assert "is absolute" in answers[1][1]
    assert not Path("/tmp/owned.txt").exists() or Path("/tmp/owned.txt").read_text() != "x"
    assert (tmp_path / "ws" / "notes" / "ok.md").read_text() == "fine"
    calls = [e for e in store.events_after(0, 1000) if e.kind == "tool_call"]
    failed = [e.data for e in calls if not e.data["ok"]]
    assert [d["tool"] for d in failed] == ["files.read", "files.write", "files.list"]
    assert all("error" in d for d in failed)
    store.close()
