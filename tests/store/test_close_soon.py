"""A store closed on a thread (Firm.close_soon, as Team.start() ends): the caller goes on at
once, and a process that exits right after still leaves its file closed, with no WAL beside."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from firm.api import Firm
from firm.org import OrgChart
from firm.tasks import Status
from tests.conftest import THREE_LEVELS

SCRIPT = """
import sys
from firm.api import Firm
from firm.org import parse_org

org = parse_org(open(sys.argv[2]).read(), sys.argv[2])
firm = Firm(sys.argv[1])
root = firm.run(org, "Launch the product")
print(root.id, root.status, flush=True)
firm.close_soon()
# the script ends here: the process waits for the close as it exits
"""


def test_a_process_that_exits_right_after_close_soon_leaves_its_store_closed(
    tmp_path: Path,
) -> None:
    db, org = tmp_path / "firm.db", tmp_path / "company.yaml"
    org.write_text(textwrap.dedent(THREE_LEVELS), encoding="utf-8")
    (tmp_path / "run.py").write_text(SCRIPT, encoding="utf-8")
    out = subprocess.run(
        [sys.executable, str(tmp_path / "run.py"), str(db), str(org)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    assert out[1] == "done"
    assert not Path(f"{db}-wal").exists()
    with Firm(db) as firm:
        assert firm.task(out[0]).status == Status.DONE


def test_what_was_written_is_read_while_the_close_goes_on(
    tmp_path: Path, three_levels: OrgChart
) -> None:
    db = tmp_path / "firm.db"
    firm = Firm(db)
    root = firm.run(three_levels, "Launch the product")
    tasks = len(firm.subtree(root.id))
    firm.close_soon()
    with Firm(db) as again:  # at once, in the same process
        assert again.task(root.id).status == Status.DONE
        assert len(again.subtree(root.id)) == tasks
