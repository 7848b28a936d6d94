"""What a write leaves behind: the old file or the new one, whole, even when the writing
process is killed at any moment; and the setting that flushes each write to disk."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from firm.errors import WorkspaceError
from firm.tools.workspace import SYNC_ENV, Limits, Workspace

# Rewrites one file for ever, alternating two contents of a few hundred kilobytes (big enough
# that a write takes several system calls), and a new file each round.
# With "ready", each round's new file is first made ready by make_folder (tools/spares.py)
# and named by the write that fills it.
WRITER = """
import sys
from firm.tools.workspace import Workspace
ws = Workspace(sys.argv[1], sync=sys.argv[2] == "1")
ready = sys.argv[3] == "1"
a, b = "A" * 300_000, "B" * 300_000
ws.write("report.md", a)
print("ready", flush=True)
i = 0
while True:
    if ready:
        ws.make_folder("rounds", files=1)
    ws.write("report.md", b if i % 2 else a)
    ws.write(f"rounds/{i % 50 if not ready else i}.md", str(i) * 1000)
    i += 1
"""


@pytest.mark.parametrize("ready", [False, True], ids=["usual", "made-ready"])
@pytest.mark.parametrize("sync", [False, True], ids=["default", "sync"])
def test_a_killed_writer_leaves_every_file_old_or_new_never_torn(
    tmp_path: Path, sync: bool, ready: bool
) -> None:
    root = tmp_path / "ws"
    for round_ in range(5):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root), "1" if sync else "0", "1" if ready else "0"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(0.05 * (round_ + 1))  # a different moment each round, not a deadline
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        assert (root / "report.md").read_text() in ("A" * 300_000, "B" * 300_000)
        for f in (root / "rounds").glob("*.md"):
            text = f.read_text()
            n = len(text) // 1000
            assert text and text == text[:n] * 1000, f  # one round's number, whole
        # A temporary file the kill left behind is no file of the workspace.
        listed = Workspace(root).list()
        assert all(not Path(p).name.startswith(".firm-") for p in listed)


def test_durability_follows_the_store_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SYNC_ENV, raising=False)
    assert Workspace(tmp_path / "a").sync is False  # as SQLite's synchronous=NORMAL
    monkeypatch.setenv(SYNC_ENV, "1")
    ws = Workspace(tmp_path / "b")
    assert ws.sync is True
    assert Workspace(tmp_path / "c", sync=False).sync is False  # an explicit choice wins
    ws.write("deep/er/plan.md", "# plan")
    ws.write("deep/er/plan.md", "# plan, revised")
    assert ws.read("deep/er/plan.md") == "# plan, revised"
    assert oct(os.stat(ws.root / "deep" / "er" / "plan.md").st_mode & 0o777) == "0o644"
    assert ws.list() == ["deep/er/plan.md"]


def test_a_deliverable_in_a_new_folder_is_readable_whatever_the_umask(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    old = os.umask(0o077)  # a strict umask would hide a deliverable from its readers
    try:
        ws.write("eng/t-1-plan.md", "# plan")  # its folder is made by this write
        ws.write("eng/t-2-plan.md", "# plan 2")  # and found by the next
    finally:
        os.umask(old)
    for name in ("t-1-plan.md", "t-2-plan.md"):
        assert oct(os.stat(ws.root / "eng" / name).st_mode & 0o777) == "0o644"
    assert ws.read("eng/t-1-plan.md") == "# plan"
    assert ws.list(".") == ["eng/t-1-plan.md", "eng/t-2-plan.md"]


def test_files_made_ready_are_written_like_any_other(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws", Limits(max_files=3))
    ws.make_folder("team", files=4)  # more than will be written: the rest are never files
    ws.make_folder("team", files=1)  # a folder that is there is left as it is
    assert ws.list() == [] and (ws.root / "team").is_dir()
    old = os.umask(0o077)
    try:
        ws.write("team/a.md", "# a")
        ws.write("elsewhere/b.md", "# b")  # any new file of the workspace takes one
    finally:
        os.umask(old)
    ws.write("team/a.md", "# a, revised")  # an existing file is replaced the usual way
    ws.write("team/c.md", "# c")
    with pytest.raises(WorkspaceError, match="holds 3 files, the limit"):
        ws.write("team/d.md", "# d")  # ready files are not files until written
    assert ws.list() == ["elsewhere/b.md", "team/a.md", "team/c.md"]
    assert ws.read("team/a.md") + ws.read("elsewhere/b.md") == "# a, revised# b"
    for path in ("team/a.md", "elsewhere/b.md", "team/c.md"):
        assert oct(os.stat(ws.root / path).st_mode & 0o777) == "0o644"
    assert sorted(os.listdir(ws.root / "team")) == ["a.md", "c.md"]  # nothing else left there
    with pytest.raises(WorkspaceError, match="exists and is not a folder"):
        ws.make_folder("team/a.md", files=1)


def test_files_made_ready_hold_a_bounded_number_of_descriptors(tmp_path: Path) -> None:
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        pytest.skip("no /proc here: nothing is made ready")
    before = len(list(fds.iterdir()))
    ws = Workspace(tmp_path / "ws")
    ws.make_folder("many", files=10_000)  # a manager of a very wide team
    assert len(list(fds.iterdir())) - before <= 32
    for i in range(40):  # more writes than files ready: the rest are made the usual way
        ws.write(f"many/{i}.md", str(i))
    assert len(ws.list("many")) == 40
    assert ws.read("many/39.md") == "39"
