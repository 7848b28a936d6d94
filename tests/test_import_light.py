"""Optional integrations stay optional: `import firm` loads none of them."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path


def test_import_firm_does_not_import_crewai() -> None:
    probe = (
        "import sys, firm, firm.api, firm.tools, firm.brains, firm.cli.main; "
        "firm.brains.make_brain('simulation'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('crewai', 'crewai_tools')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"


def test_a_simulated_run_from_the_cli_loads_only_what_it_uses(tmp_path: Path) -> None:
    # A new store is created from the schema (no migrations), and a run that calls no model
    # and serves no page loads neither the model client nor the office's web stack.
    org = resources.files("firm").joinpath("examples/demo.yaml")
    heavy = ("openai", "alembic", "fastapi", "uvicorn", "psycopg", "sqlalchemy.dialects.postgresql")
    probe = (
        "import sys\n"
        "from firm.cli.main import main\n"
        "try:\n"
        f"    main(['run', {str(org)!r}, 'Open a shop', '--db', {str(tmp_path / 'f.db')!r},"
        " '--json'])\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["status"] == "done"
    assert out.stderr.strip().splitlines()[-1] == "[]"
