"""Optional integrations stay optional: `import firm` loads none of them."""

from __future__ import annotations

import subprocess
import sys


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
