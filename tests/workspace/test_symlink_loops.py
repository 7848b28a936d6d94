"""A symlink loop in the workspace is a clear error for that entry, never a RuntimeError, and
never hides the rest of the workspace (issue 11, item 6)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from firm.errors import WorkspaceError
from firm.tools.workspace import Workspace


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("kept")
    (root / "docs").mkdir()
    (root / "docs" / "plan.md").write_text("plan")
    os.symlink("loop", root / "loop")  # a link to itself
    os.symlink("pong", root / "docs" / "ping")
    os.symlink("ping", root / "docs" / "pong")
    return Workspace(root)


@pytest.mark.parametrize("path", ["loop", "loop/inner.txt", "docs/ping", "docs/pong/x"])
@pytest.mark.parametrize("tool", ["read", "write", "list"])
def test_every_file_tool_names_the_loop(ws: Workspace, tool: str, path: str) -> None:
    call = {"read": ws.read, "list": ws.list, "write": lambda p: ws.write(p, "x")}[tool]
    with pytest.raises(WorkspaceError, match="symlink loop"):
        call(path)


def test_a_loop_does_not_hide_the_rest_of_the_listing(ws: Workspace) -> None:
    listing = ws.list(".")
    assert "notes.txt" in listing and "docs/plan.md" in listing
    assert "loop (unreadable: a symlink loop)" in listing
    assert "docs/ping (unreadable: a symlink loop)" in listing
