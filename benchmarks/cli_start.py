"""How long `firm run` takes to reach its first model call, against the Python API.

A manager and 3 reports, the llm brain against firm.testing's scripted model answering every
call after 0.2 s (three model calls deep: delegate, the reports in parallel, merge). Measured
from the moment the process is started (CLI, and a `python -c` using the API) and, for the
API, also from `Firm(...)` inside an already-running interpreter: the time to the first model
request, the total, and the time from the last model reply to the process's exit. For the
new processes also their CPU time (user + system), which a loaded machine disturbs far less
than it does wall time.

    python benchmarks/cli_start.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import firm
from firm.testing import ModelServer, ScriptedModel
from firm.testing.script import ModelRequest, Reply

DELAY = 0.2
GOAL = "Write a short launch note"
ORG = """company: Small Co
agents:
  - {id: boss, name: Boss, title: Engineering Manager}
  - {id: r1, name: R1, title: Engineer, reports_to: boss}
  - {id: r2, name: R2, title: Engineer, reports_to: boss}
  - {id: r3, name: R3, title: Engineer, reports_to: boss}
"""

API_SCRIPT = """
import os, sys
from firm.api import Firm
with Firm(sys.argv[1]) as firm:
    root = firm.run(sys.argv[2], sys.argv[3], brain="llm", workspace=sys.argv[4],
                    brain_options={"model": os.environ["FIRM_MODEL"],
                                   "base_url": os.environ["OPENAI_BASE_URL"]}, timeout=120)
    assert root.status.value == "done", root.error
"""


def slow_model() -> ModelServer:
    model = ScriptedModel()

    def answer(req: ModelRequest) -> Reply:
        time.sleep(DELAY)
        return model.answer(req)

    return ModelServer(answer)


def figures(server: ModelServer, started: float, ended: float) -> tuple[float, float, float]:
    reqs = server.requests
    first = min(r.started for r in reqs) - started
    last = max(r.ended or r.started for r in reqs)
    return first, ended - started, ended - last


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_process(argv: list[str], env: dict[str, str]) -> tuple[float, ...]:
    with slow_model() as server:
        full_env = {**os.environ, **server.env()}
        cpu0 = _children_cpu()
        started = time.time()
        proc = subprocess.run(argv, env=full_env, capture_output=True, text=True)
        ended = time.time()
        cpu = _children_cpu() - cpu0
        if proc.returncode != 0:
            raise SystemExit(f"{argv[:3]} failed:\n{proc.stdout}\n{proc.stderr}")
        return (*figures(server, started, ended), cpu)


def run_in_process(tmp: Path) -> tuple[float, ...]:
    from firm.api import Firm

    with slow_model() as server:
        started = time.time()
        with Firm(tmp / "api.db") as firm:
            root = firm.run(
                tmp / "org.yaml",
                GOAL,
                brain="llm",
                brain_options=server.brain_options(),
                workspace=tmp / "ws-api",
                timeout=120,
            )
        ended = time.time()
        assert root.status.value == "done", root.error
        return (*figures(server, started, ended), float("nan"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    # Byte-compiled as an installed package is: with PYTHONDONTWRITEBYTECODE set (as on some
    # machines) an editable checkout would otherwise compile firm's sources in every process.
    compileall.compile_dir(str(Path(firm.__file__).parent), quiet=1)
    firm_cmd = [sys.executable, "-m", "firm"]
    rows: dict[str, list[tuple[float, ...]]] = {"cli": [], "api-proc": [], "api": []}
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory() as name:
            tmp = Path(name)
            (tmp / "org.yaml").write_text(ORG)
            org, db = str(tmp / "org.yaml"), str(tmp / f"cli{i}.db")
            cli = [*firm_cmd, "run", org, GOAL, "--brain", "llm", "--db", db]
            rows["cli"].append(run_process([*cli, "--workspace", str(tmp / "ws-cli")], {}))
            api = [sys.executable, "-c", API_SCRIPT, str(tmp / "p.db"), org, GOAL]
            rows["api-proc"].append(run_process([*api, str(tmp / "ws-p")], {}))
            rows["api"].append(run_in_process(tmp))
    labels = {
        "cli": "firm run (new process)",
        "api-proc": "Python API (new process)",
        "api": "Python API (in process)",
    }
    print(f"manager + 3 reports, {DELAY} s per model call, median of {args.repeat}:")
    for key, label in labels.items():
        first, total, tail, cpu = (statistics.median(c) for c in zip(*rows[key], strict=True))
        print(
            f"  {label:26} first model call {first:5.2f} s · total {total:5.2f} s · "
            f"last reply to exit {tail:5.2f} s" + ("" if cpu != cpu else f" · CPU {cpu:4.2f} s")
        )


if __name__ == "__main__":
    main()
