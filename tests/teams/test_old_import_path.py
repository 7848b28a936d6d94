"""`firm.process` was renamed `firm.teams`: the old import path keeps working for one release."""

from __future__ import annotations

import subprocess
import sys


def test_old_path_gives_the_same_objects_with_a_deprecation_warning() -> None:
    # A fresh interpreter: the warning is raised once, when firm.process is first imported.
    code = """
import warnings
warnings.simplefilter("error", DeprecationWarning)
import firm.teams, firm.teams.run, firm.teams.members
try:
    import firm.process
except DeprecationWarning as exc:
    print("warned:", exc)
warnings.simplefilter("ignore", DeprecationWarning)
import firm.process
from firm.process.members import Task
from firm.process import run
import firm.process.files as files
import firm.teams.files
assert firm.process.Team is firm.teams.Team
assert Task is firm.teams.members.Task
assert run is firm.teams.run and files is firm.teams.files
assert firm.teams.run.__spec__.name == "firm.teams.run"
print("same objects")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "warned: firm.process is renamed firm.teams" in out
    assert "same objects" in out
