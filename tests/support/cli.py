"""Running the real `firm` command in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# How long a test waits for a `firm` (or any Python) process it started to reach the point it
# watches for. Only a hang should ever use it up: a fresh Python importing firm has taken over
# 60 s to make its first model call on a machine at load 20.
SUBPROCESS_GUARD = 180.0


def firm_cli(
    *args: str,
    cwd: Path,
    timeout: float = SUBPROCESS_GUARD,
    env: dict[str, str] | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run `firm` as `python -m firm` (so this checkout's code runs). The caller's FIRM_DB is
    dropped unless env sets one: a test says which store it means."""
    full_env = {k: v for k, v in os.environ.items() if k != "FIRM_DB"}
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "firm", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"firm {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc
