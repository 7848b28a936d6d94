"""Figures for authority and audit: the cost of the check, of exporting and of verifying.

    python benchmarks/audit_trail.py [--managers 10] [--reports 10]

Runs a simulated company (one CEO, M managers, R reports each), then prints: the run's wall
time, what one authority check costs (reading the lineage and deciding), the time to export
the root's tree, the bundle's size, and the time to verify it. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import yaml

from firm.api import Firm
from firm.audit.keys import parse_public_key
from firm.audit.verify import verify_bundle
from firm.authority.check import check_call
from firm.engine.company import Company
from firm.session import Session
from firm.tools.builtin import FILE_TOOLS


def org_text(managers: int, reports: int) -> str:
    agents = [
        {"id": "ceo", "name": "Ava", "title": "Chief Executive Officer", "budget_tokens": 10**9}
    ]
    for m in range(managers):
        agents.append(
            {"id": f"m{m}", "name": f"M{m}", "title": "Engineering Manager", "reports_to": "ceo"}
        )
        for r in range(reports):
            agents.append(
                {
                    "id": f"m{m}-r{r}",
                    "name": f"R{r}",
                    "title": "Backend Engineer",
                    "reports_to": f"m{m}",
                }
            )
    return yaml.safe_dump({"company": "Bench Co", "max_concurrent": 8, "agents": agents})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--managers", type=int, default=10)
    ap.add_argument("--reports", type=int, default=10)
    ap.add_argument("--checks", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        org = Path(tmp) / "company.yaml"
        org.write_text(org_text(args.managers, args.reports))
        with Firm(Path(tmp) / "state" / "firm.db", heartbeat=0.1) as firm:
            t0 = time.perf_counter()
            root = firm.run(org, "Build the product", workspace=Path(tmp) / "ws", timeout=600)
            run_s = time.perf_counter() - t0
            tasks = firm.subtree(root.id)
            events = firm.store.last_seq()
            print(f"run: {len(tasks)} tasks, {events} events, {run_s:.2f} s ({root.status})")

            leaf = tasks[-1]
            company = Company.from_run(firm.store.run(root.id))
            session = Session(
                store=firm.store, company=company, task=leaf, subtasks=[], brief="",
                cancel_event=__import__("threading").Event(), worker_id="bench",
            )  # fmt: skip
            write = FILE_TOOLS[1]
            call_args = {"path": "x.md", "content": "x"}
            t0 = time.perf_counter()
            for _ in range(args.checks):
                standing, _fresh = session.standing()
                check_call(company.org, standing, write, call_args)
            per = (time.perf_counter() - t0) / args.checks
            print(
                f"one check (lineage of {len(standing.lineage)}, read + decide): {per * 1e6:.0f} µs"
            )

            t0 = time.perf_counter()
            bundle = firm.export_audit(root.id)
            export_s = time.perf_counter() - t0
            size = len(json.dumps(bundle))
            key = parse_public_key(firm.audit_key().public_text)
        print(f"export: {len(bundle['entries'])} entries, {size / 1024:.0f} KiB, {export_s:.2f} s")
        t0 = time.perf_counter()
        report = verify_bundle(bundle, key)
        verify_s = time.perf_counter() - t0
        print(f"verify: {verify_s:.2f} s, verified={report.verified}")
        for c in report.checks:
            print("  " + c.line())


if __name__ == "__main__":
    main()
