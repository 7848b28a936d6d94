"""Model calls and prompt tokens to finish a goal, against the minimum: one call per leaf task,
two per manager task (delegate, then merge).

The llm brain drives the demo company (and a wider one) through the real HTTP path, against
firm.testing's scripted model — the autopilot, which always makes the right calls in as few
replies as possible — so any call above the minimum is one firm itself wasted. Also printed:
prompt tokens (estimated by the scripted server at four characters a token) and the share of
them that is the stable per-agent prefix (system prompt and tools) a provider's prompt cache
can serve.

    python benchmarks/llm_calls.py [--fanout 3] [--depth 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from importlib import resources
from pathlib import Path

from firm.api import Firm
from firm.org import OrgChart, parse_org
from firm.testing import ModelServer, ScriptedModel

GOAL = "Launch an AI note-taking app"


def wide_company(fanout: int, depth: int) -> str:
    lines = ["company: Wide Co", "max_concurrent: 8", "agents:"]
    lines.append("  - {id: a, name: A, title: Chief Executive Officer}")
    level = ["a"]
    for d in range(1, depth):
        title = "Engineer" if d == depth - 1 else "Engineering Manager"
        nxt = []
        for boss in level:
            for i in range(fanout):
                ident = f"{boss}{i}"
                lines.append(
                    f"  - {{id: {ident}, name: N{ident}, title: {title}, reports_to: {boss}}}"
                )
                nxt.append(ident)
        level = nxt
    return "\n".join(lines) + "\n"


def measure(name: str, org: OrgChart) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        ModelServer(ScriptedModel()) as server,
        Firm(Path(tmp) / "firm.db", heartbeat=0.2) as firm,
    ):
        started = time.perf_counter()
        root = firm.run(
            org,
            GOAL,
            brain="llm",
            brain_options=server.brain_options(),
            workspace=Path(tmp) / "ws",
            timeout=600,
        )
        seconds = time.perf_counter() - started
        assert root.status.value == "done", root.error
        tree = firm.subtree(root.id)
        calls = sum(t.usage["calls"] for t in tree)
        prompt = sum(t.usage["prompt_tokens"] for t in tree)
        completion = sum(t.usage["completion_tokens"] for t in tree)
        managers = {a.id for a in org.agents if org.reports(a.id)}
        minimum = sum(2 if t.assignee in managers else 1 for t in tree)
        prefix_chars = total_chars = 0
        for r in server.requests:
            body = r.body
            prefix = len(json.dumps(body["messages"][0])) + len(json.dumps(body.get("tools", [])))
            prefix_chars += prefix
            total_chars += len(json.dumps(body["messages"])) + len(json.dumps(body.get("tools")))
    print(
        f"{name}: {len(tree)} tasks ({len(managers)} managers) · "
        f"model calls {calls} (minimum {minimum}, extra {calls - minimum}) · "
        f"prompt tokens {prompt} ({prompt / calls:.0f}/call) · completion tokens {completion} · "
        f"cacheable prefix {100 * prefix_chars / total_chars:.0f}% of prompt · "
        f"{seconds:.2f}s wall"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--fanout", type=int, default=3)
    parser.add_argument("--depth", type=int, default=3)
    args = parser.parse_args()
    demo = resources.files("firm").joinpath("examples/demo.yaml").read_text(encoding="utf-8")
    measure("demo company", parse_org(demo, "firm:examples/demo.yaml"))
    wide = wide_company(args.fanout, args.depth)
    measure(f"fan-out {args.fanout}, depth {args.depth}", parse_org(wide, "<wide>"))


if __name__ == "__main__":
    main()
