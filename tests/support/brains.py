"""Brains the engine tests share — one that counts the sessions running at once, one whose
reports think long enough to still be running when a test stops the engine — and the team
they run: a CEO with four engineers (ids e0–e3), and charts of managers and engineers."""

from __future__ import annotations

import threading

from firm.brains.simulation import SimulationBrain
from firm.org import parse_org
from firm.session import Session
from firm.testing import FunctionBrain

TEAM = parse_org(
    "company: T\nagents:\n  - {id: ceo, name: C, title: CEO}\n"
    + "".join(
        f"  - {{id: e{i}, name: E{i}, title: Backend Engineer, reports_to: ceo}}\n"
        for i in range(4)
    ),
    "<test>",
)


def two_levels(company: str, managers: int, reports: int, ceo: str = "C") -> str:
    """The YAML of a chart with a CEO, `managers` engineering managers (m0…) and `reports`
    backend engineers under each (e00…), at most three sessions at once."""
    return (
        f"company: {company}\nmax_concurrent: 3\nagents:\n"
        f"  - {{id: ceo, name: {ceo}, title: Chief Executive Officer}}\n"
    ) + "".join(
        f"  - {{id: m{i}, name: M{i}, title: Engineering Manager, reports_to: ceo}}\n"
        + "".join(
            f"  - {{id: e{i}{j}, name: E{i}{j}, title: Backend Engineer, reports_to: m{i}}}\n"
            for j in range(reports)
        )
        for i in range(managers)
    )


class PeakCount:
    """The simulation brain at `latency`, counting its sessions: `peak` is the most that
    were running at once."""

    def __init__(self, latency: float = 0.05):
        self.running = 0
        self.peak = 0
        self._lock = threading.Lock()
        self._sim = SimulationBrain(latency=latency)
        self.brain = FunctionBrain({}, default=self._run)

    def _run(self, session: Session) -> str | None:
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            return self._sim.run(session)
        finally:
            with self._lock:
                self.running -= 1


def slow_reports() -> FunctionBrain:
    """Managers act at once; the reports (agents whose id starts with "e") think for a
    minute, so they are still running when the test stops the engine."""
    quick, slow = SimulationBrain(), SimulationBrain(latency=60)

    def run(session: Session) -> str | None:
        return (slow if session.agent_id.startswith("e") else quick).run(session)

    return FunctionBrain({}, default=run)
