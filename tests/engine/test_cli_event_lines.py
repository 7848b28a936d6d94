"""A run's event lines as `firm run` prints them when its output is not a terminal: each
commit's lines are printed by the thread that made it, after the commit, so the run's last
lines can still be on their way when the main thread sees the run end. The report must
still come after them, and each line print once."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from firm.api import Firm
from firm.cli import common
from firm.store import NewTask, RunSpec
from firm.store.base import Event

RUN = RunSpec("", "<t>", "simulation", {}, ".")


def test_lines_still_on_their_way_print_before_the_report_and_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = io.StringIO()
    monkeypatch.setattr(common.console, "file", out)
    with Firm(str(tmp_path / "f.db")) as firm:
        lines = common.EventLines(firm.store.last_seq())
        held: list[list[Event]] = []  # a commit whose thread has not printed it yet
        unsubscribe = firm.store.subscribe(held.append)
        try:
            first = firm.store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
            lines.print(held.pop(0))  # printed as it committed
            firm.store.cancel(first.id, "stop")  # committed; its lines still on their way
        finally:
            unsubscribe()
        # Another run's entry, committed by another process on a shared store: not this run's.
        other = firm.store.create_run(RUN, NewTask("Other goal", "", "ceo", "user"))
        lines.catch_up(firm, [first.id])  # what the CLI does before its report
        out.write("REPORT\n")
        lines.print(held.pop(0))  # the late delivery: already printed
    *events, last = out.getvalue().splitlines()
    assert [line.split()[1:3] for line in events] == [
        ["created", first.id],
        ["cancelled", first.id],
    ]
    assert last == "REPORT"
    assert other.id not in out.getvalue()
