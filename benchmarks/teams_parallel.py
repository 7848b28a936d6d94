"""Parallel teams: three independent tasks with every model call answered 0.2 s after its
request arrived, each task run one at a time and then marked async_execution=True, against
the ideal.

The ideal is the chain of model calls nothing can overlap, at 0.2 s each:

- hierarchical, one at a time: each task is a manager turn then the task (6 calls deep);
- hierarchical, async: the manager's three turns back to back, then the last task (4 deep);
- sequential, one at a time: the three tasks (3 deep); sequential, async: they start
  together (1 deep).

Printed per case: the wall time of `team.start()` (median of --repeat runs, each a new
store), its ratio to the ideal with async tasks, firm's overhead per model call on the
case's own chain ((wall - chain) / calls deep), the process's CPU time per model call (a
figure a loaded machine disturbs far less than wall time), the model calls made and the
firm sessions they took.
The model is firm.testing's scripted server on loopback: a manager that picks the first
task not started, workers that answer at once — after the delay. Each case is run with that
server in a process of its own (`process`) and in firm's own process (`thread`), and both
figures are printed. A real model is remote: reading and answering a request costs firm no
CPU. In firm's process the server's request parsing takes the interpreter lock in the middle
of the gaps counted as firm's (0.7-1.6 ms a call, traced); in its own process it is still
real HTTP on loopback, and the overhead measured is firm's alone. The in-process figure is
kept for comparison with earlier rounds, which measured only that.
The delay is the model's latency, as a remote model's includes its own work: the server
reads the request, chooses and encodes the answer, then waits what is left of the 0.2 s and
sends it (a streamed answer in one write). Until the sixteenth round it slept the 0.2 s
first and did that work after, ~1.3 ms a call counted as firm's overhead (traced).

    python benchmarks/teams_parallel.py [--repeat 3] [--delay 0.2] [--cases NAME ...]
                                        [--server process thread]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from firm import Agent, Task, Team
from firm.api import Firm
from firm.testing import ModelRequest, ModelServer, Reply, text
from firm.testing.serve import ServerProcess

NOT_STARTED = re.compile(r"^- (\S+) \[not started\].*\n  Meant for: (.+)$", re.M)
CASES = {  # name: (process, async_execution, model calls deep, deep with async)
    "hierarchical": ("hierarchical", False, 6, 4),
    "hierarchical-async": ("hierarchical", True, 4, 4),
    "sequential": ("sequential", False, 3, 1),
    "sequential-async": ("sequential", True, 1, 1),
}


def answer(delay: float):  # type: ignore[no-untyped-def]
    def reply(req: ModelRequest) -> Reply:
        # The server sends this `delay` after the request arrived, its own work included.
        if req.agent != "manager":
            return text(f"{req.agent} did: {req.task_title}", delay=delay)
        found = NOT_STARTED.search(req.brief.partition("Earlier turns of this run:")[0])
        if found is None:
            decision = {"task_id": "", "agent_name": "", "action": "stop"}
        else:
            task_id, agent = found.groups()
            decision = {"task_id": task_id, "agent_name": agent, "action": "execute"}
        return text(json.dumps(decision), delay=delay)

    return reply


def team(process: str, background: bool, tmp: Path) -> Team:
    agents = [Agent(name=f"w{i}", role=f"Worker {i}") for i in range(1, 4)]
    extra = {"async_execution": True} if background else {}  # absent before the flag existed
    tasks = [
        Task(f"Look into part {i} of the job", agent=a, name=f"t{i}", **extra)
        for i, a in enumerate(agents, 1)
    ]
    return Team(agents=agents, tasks=tasks, process=process, db=tmp / "firm.db",
                workspace=tmp / "ws")  # fmt: skip


@contextlib.contextmanager
def model_server(kind: str, delay: float) -> Iterator[Callable[[], int]]:
    """The scripted model on loopback, in its own process or in this one; yields how to
    count the requests it received."""
    if kind == "process":
        with ServerProcess(f"{Path(__file__).resolve()}:answer", delay) as child:
            os.environ.update(child.env())
            yield child.request_count
    else:
        with ModelServer(answer(delay)) as server:
            os.environ.update(server.env())
            yield lambda: len(server.requests)


def run_once(case: str, delay: float, server: str) -> tuple[float, float, int, int]:
    process, background, _, _ = CASES[case]
    with tempfile.TemporaryDirectory() as tmp, model_server(server, delay) as requests:
        t = team(process, background, Path(tmp))
        started, cpu = time.perf_counter(), time.process_time()
        t.start()
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        with Firm(Path(tmp) / "firm.db") as firm:
            sessions = sum(1 for e in firm.events(limit=100_000) if e.kind == "started")
        return seconds, cpu, requests(), sessions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument(
        "--server", nargs="+", choices=["process", "thread"], default=["process", "thread"]
    )
    args = parser.parse_args()
    for case, server in ((c, s) for c in args.cases for s in args.server):
        runs = [run_once(case, args.delay, server) for _ in range(args.repeat)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        _, _, calls, sessions = runs[-1]
        _, _, deep, best = CASES[case]
        chain, ideal = deep * args.delay, best * args.delay
        print(
            f"{case:<19} server in {server:<7} measured {wall:.2f}s = {wall / ideal:.2f}x the "
            f"ideal of {ideal:.2f}s "
            f"({best} calls deep) · its own chain {deep} calls deep, {chain:.2f}s: overhead "
            f"{1000 * (wall - chain) / deep:.0f} ms per call on it · CPU "
            f"{1000 * cpu / calls:.0f} ms per model call · {calls} model calls, {sessions} "
            f"firm sessions ({sessions / calls:.2f} per call)"
        )


if __name__ == "__main__":
    main()
