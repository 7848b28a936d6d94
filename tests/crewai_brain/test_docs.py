"""docs/crewai.md's worked example runs as written: its chart, its tool module, its script."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "crewai.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_worked_example_runs(tmp_path: Path) -> None:
    (chart,) = _blocks("yaml")
    tools, example = _blocks("python")
    assert tools.startswith("# web_tools.py")
    (tmp_path / "company.yaml").write_text(chart)
    (tmp_path / "web_tools.py").write_text(tools)
    (tmp_path / "example.py").write_text(example)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "FIRM_"))}
    out = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "Launched"
    assert lines[1] == "6 model calls"  # ceo 2, cto 3 (search, delegate, merge), dev 1
