"""The crewai brain against the llm brain on the same company: model calls per goal (against
the minimum: one per leaf task, two per manager task), prompt tokens, and firm's own overhead
per model call — wall time spent outside the model server, divided by the calls.

Both brains call firm.testing's scripted model (the autopilot, which makes the right calls in
as few replies as possible) over real HTTP, so a call above the minimum is one the brain
wasted. Needs the crewai extra. Also printed: how long `import firm.brains.crewai` takes.

    python benchmarks/crewai_calls.py [--fanout 3] [--depth 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

from firm.api import Firm
from firm.org import OrgChart, parse_org
from firm.testing import ModelServer, ScriptedModel, calls, complete, write_file

sys.path.insert(0, str(Path(__file__).parent))
from llm_calls import GOAL, wide_company


def measure(name: str, org: OrgChart, brain: str) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        ModelServer(ScriptedModel()) as server,
        Firm(Path(tmp) / "firm.db", heartbeat=0.2) as firm,
    ):
        started = time.perf_counter()
        root = firm.run(
            org,
            GOAL,
            brain=brain,
            brain_options=server.brain_options(),
            workspace=Path(tmp) / "ws",
            timeout=900,
        )
        seconds = time.perf_counter() - started
        assert root.status.value == "done", root.error
        tree = firm.subtree(root.id)
        calls = sum(t.usage["calls"] for t in tree)
        prompt = sum(t.usage["prompt_tokens"] for t in tree)
        managers = {a.id for a in org.agents if org.reports(a.id)}
        minimum = sum(2 if t.assignee in managers else 1 for t in tree)
    print(
        f"{name} · {brain:6}: {len(tree)} tasks · model calls {calls} (minimum {minimum}, "
        f"extra {calls - minimum}) · prompt tokens {prompt} ({prompt / calls:.0f}/call) · "
        f"{seconds:.2f}s wall"
    )


ONE_AGENT = "company: Solo\nagents:\n  - {id: dev, name: Dee, title: Engineer}\n"


def one_session(brain: str, replies: int) -> tuple[float, float]:
    """One agent, one session of `replies` model calls (a file written each, then
    complete_task): seconds from submit to done, and seconds the server spent answering."""
    model = ScriptedModel(autopilot=False)
    model.when(agent="dev").reply(
        # Each call different: CrewAI stops an agent that repeats the same call five times.
        *[calls(write_file(f"dev/{i}.md", f"part {i}")) for i in range(replies - 1)],
        calls(complete("listed")),
    )
    with (
        tempfile.TemporaryDirectory() as tmp,
        ModelServer(model) as server,
        Firm(Path(tmp) / "firm.db", heartbeat=0.2) as firm,
    ):
        started = time.perf_counter()
        root = firm.run(
            parse_org(ONE_AGENT, "<solo>"),
            "List the files",
            brain=brain,
            brain_options=server.brain_options(max_iterations=replies + 1),
            workspace=Path(tmp) / "ws",
            timeout=600,
        )
        seconds = time.perf_counter() - started
        assert root.status.value == "done", root.error
        in_server = sum((r.ended or r.started) - r.started for r in server.requests)
    return seconds, in_server


def overhead(brain: str, replies: int = 21) -> None:
    """firm's (and the brain's) time per model call outside the model: the difference
    between a long session and a one-call one, less the server's time, per extra call."""
    one_session(brain, 2)  # warm up: imports, the first crew
    short, short_server = one_session(brain, 1)
    long, long_server = one_session(brain, replies)
    per_call = ((long - long_server) - (short - short_server)) / (replies - 1)
    print(
        f"one agent, {replies} model calls · {brain:6}: {long:.2f}s wall · "
        f"overhead {1000 * per_call:.1f} ms per model call (outside the model server)"
    )


def import_seconds() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import firm.brains.crewai"], check=True)
    return time.perf_counter() - started - _python_seconds()


def _python_seconds() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import firm.api"], check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--fanout", type=int, default=3)
    parser.add_argument("--depth", type=int, default=3)
    args = parser.parse_args()
    print(f"import firm.brains.crewai: {import_seconds():.1f}s on top of import firm.api")
    demo = resources.files("firm").joinpath("examples/demo.yaml").read_text(encoding="utf-8")
    wide = wide_company(args.fanout, args.depth)
    for brain in ("llm", "crewai"):
        measure("demo company", parse_org(demo, "firm:examples/demo.yaml"), brain)
    for brain in ("llm", "crewai"):
        overhead(brain)
    for brain in ("llm", "crewai"):
        measure(f"fan-out {args.fanout}, depth {args.depth}", parse_org(wide, "<wide>"), brain)


if __name__ == "__main__":
    main()
