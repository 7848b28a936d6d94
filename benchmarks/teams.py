"""A team's cost beside the work itself: model calls against the minimum, firm tasks created,
and wall time per step, for sequential and hierarchical teams of growing size.

The minimum is one model call per task, plus one per manager turn in a hierarchical team
(the manager must choose each task once). The model is firm.testing's scripted server
answering at once — a manager that always picks the first task not started, and the agent
it was meant for — so the time measured is firm's: the engine, the store, the HTTP path.

    python benchmarks/teams.py [--sizes 3 10 30]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from pathlib import Path

from firm import Agent, Task, Team
from firm.api import Firm
from firm.testing import ModelRequest, ModelServer, Reply, ScriptedModel, text

NOT_STARTED = re.compile(r"^- (\S+) \[not started\].*\n  Meant for: (.+)$", re.M)


def manager(req: ModelRequest) -> Reply:
    found = NOT_STARTED.search(req.brief)
    if found is None:
        return text(json.dumps({"task_id": "", "agent_name": "", "action": "stop"}))
    task_id, agent = found.groups()
    return text(json.dumps({"task_id": task_id, "agent_name": agent, "action": "execute"}))


def worker(req: ModelRequest) -> Reply:
    return text(f"{req.agent} did: {req.task_title}")


def measure(process: str, size: int) -> None:
    model = ScriptedModel(autopilot=False)
    model.when(agent="manager").always(manager)
    model.when().always(worker)
    agents = [Agent(name=f"w{i}", role=f"Worker {i}") for i in range(3)]
    tasks = [Task(f"Step {n} of the job", agent=agents[n % 3], name=f"t{n}") for n in range(size)]
    with tempfile.TemporaryDirectory() as tmp, ModelServer(model) as server:
        os.environ.update(server.env())
        db = Path(tmp) / "firm.db"
        team = Team(
            agents=agents,
            tasks=tasks,
            process=process,
            db=db,
            workspace=Path(tmp) / "ws",
            max_iter=2 * size,
        )
        started = time.perf_counter()
        team.start()
        seconds = time.perf_counter() - started
        calls = len(server.requests)
        with Firm(db) as firm:
            created = len(firm.tasks(limit=100_000))
    minimum = size * (2 if process == "hierarchical" else 1)
    print(
        f"{process:<12} {size:>3} tasks · model calls {calls} (minimum {minimum}, extra "
        f"{calls - minimum}) · firm tasks {created} · {seconds:.2f}s "
        f"({1000 * seconds / size:.0f} ms per team task)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 10, 30])
    args = parser.parse_args()
    for process in ("sequential", "hierarchical"):
        for size in args.sizes:
            measure(process, size)


if __name__ == "__main__":
    main()
