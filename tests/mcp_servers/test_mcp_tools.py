"""MCP servers as tool sources, against a real MCP server (tests/mcp_servers/ledger_server.py)
over stdio and streamable HTTP, with the llm brain talking to firm.testing's loopback model.

The server records every tool body it runs, so "denied" means "never reached the server".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from firm import Firm
from firm.org import parse_org
from firm.testing import ModelServer, ScriptedModel, call, calls, complete, delegate
from tests.support import SUBPROCESS_GUARD, firm_cli
from tests.support.ports import listening

pytestmark = pytest.mark.timeout(240)

HERE = Path(__file__).parent
SERVER = HERE / "ledger_server.py"


def chart(record: Path, server: str | None = None, extra_limits: str = "") -> str:
    where = (
        f"url: {server}"
        if server
        else f"command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(SERVER))}, "
        f"{json.dumps(str(record))}]"
    )
    return f"""\
company: Ledger Co
mcp_servers:
  ledger:
    {where}
    timeout: 20
    limits: {{transfer.amount: max_amount{extra_limits}}}
agents:
  - id: cfo
    name: Ava
    title: Chief Financial Officer
    tools: ["ledger.*", "files.*"]
    limits: {{max_amount: 500}}
  - id: clerk
    name: Ben
    title: Accounts Clerk
    reports_to: cfo
    tools: ["ledger.balance", "ledger.transfer", "ledger.crash", "files.*"]
"""


def executed(record: Path) -> list[dict[str, Any]]:
    path = record / "executed.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def tool_results(server: ModelServer, agent: str) -> list[str]:
    return [r for req in server.requests_for(agent) for r in req.request.tool_results]


def run(tmp_path: Path, org_text: str, model: ScriptedModel, **options: Any) -> Any:
    org = parse_org(org_text, str(tmp_path / "company.yaml"))
    with ModelServer(model) as server, Firm(tmp_path / "firm.db") as firm:
        root = firm.run(
            org,
            "Pay the supplier",
            brain="llm",
            brain_options=server.brain_options(),
            workspace=tmp_path / "ws",
            timeout=120,
            **options,
        )
        events = firm.events(0, 10_000)
        return root, server, events


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_allowed_calls_reach_the_server_and_denied_ones_never_do(tmp_path: Path) -> None:
    record = tmp_path / "record"
    model = ScriptedModel()
    model.when(agent="cfo", step=0).reply(
        calls(
            call("ledger_balance", account="ops"),
            call("ledger_transfer", account="ops", amount=900),  # over max_amount: 500
            call("ledger_export_report", title="Q3"),
            call("ledger_chart"),
        )
    )
    model.when(agent="cfo", step=1).reply(calls(complete("Paid what I may.")))
    root, server, events = run(tmp_path, chart(record), model)
    assert root.status == "done", root.error

    ran = executed(record)
    assert [e["tool"] for e in ran] == ["balance", "export-Report", "chart"]
    results = tool_results(server, "cfo")
    assert any("1250.5" in r for r in results)  # structured content reached the model
    denial = next(r for r in results if "max_amount" in r)
    assert "900" in denial and "500" in denial
    assert any("# Q3" in r for r in results)

    # The image was saved into the workspace, and the model was given its path.
    saved = next(r for r in results if "saved as" in r)
    path = saved.rsplit("saved as ", 1)[1].strip()
    assert (tmp_path / "ws" / path).read_bytes().startswith(b"\x89PNG")

    allowed = {e.data["tool"] for e in events if e.kind == "tool_call"}
    denied = {e.data["tool"] for e in events if e.kind == "tool_denied"}
    assert {"ledger.balance", "ledger.export_report", "ledger.chart"} <= allowed
    assert denied == {"ledger.transfer"}

    # The tools are offered to the model with the server's own schema.
    offered = server.requests_for("cfo")[0].request.tool("ledger_transfer")
    assert offered is not None
    params = offered["parameters"]
    assert set(params["required"]) == {"account", "amount"}


def test_a_narrowed_delegate_cannot_call_what_its_manager_did_not_grant(tmp_path: Path) -> None:
    record = tmp_path / "record"
    model = ScriptedModel()
    model.when(agent="cfo", woken=False).reply(
        calls(delegate("clerk", "Check the balance", "Check ops", tools=["ledger.balance"]))
    )
    model.when(agent="clerk", step=0).reply(
        calls(
            call("ledger_transfer", account="ops", amount=10),
            call("ledger_balance", account="ops"),
        )
    )
    model.when(agent="clerk", step=1).reply(calls(complete("Balance checked.")))
    model.when(agent="cfo", woken=True).reply(calls(complete("Done.")))
    root, server, _events = run(tmp_path, chart(record), model)
    assert root.status == "done", root.error

    assert [e["tool"] for e in executed(record)] == ["balance"]
    # Not offered to the clerk, and refused when called anyway.
    first = server.requests_for("clerk")[0].request
    assert "ledger_balance" in first.tool_names
    assert "ledger_transfer" not in first.tool_names
    assert any("ledger" in r and "transfer" in r for r in tool_results(server, "clerk"))


def test_a_server_that_dies_mid_call_is_restarted_for_the_next_call(tmp_path: Path) -> None:
    record = tmp_path / "record"
    model = ScriptedModel()
    model.when(agent="cfo", woken=False).reply(calls(delegate("clerk", "Reconcile", "Reconcile")))
    model.when(agent="clerk", step=0).reply(calls(call("ledger_crash")))
    model.when(agent="clerk", step=1).reply(calls(call("ledger_balance", account="ops")))
    model.when(agent="clerk", step=2).reply(calls(complete("Reconciled.")))
    model.when(agent="cfo", woken=True).reply(calls(complete("Done.")))
    root, server, _ = run(tmp_path, chart(record), model)
    assert root.status == "done", root.error

    ran = executed(record)
    assert [e["tool"] for e in ran] == ["crash", "balance"]
    assert ran[0]["pid"] != ran[1]["pid"], "the server was not restarted"
    results = tool_results(server, "clerk")
    assert any("stopped during the call" in r for r in results)
    assert any("1250.5" in r for r in results)
    # Nothing is left running once the company is closed.
    assert not pid_alive(ran[1]["pid"])


def test_a_server_that_cannot_start_fails_the_run_at_load_with_its_name(tmp_path: Path) -> None:
    org = tmp_path / "company.yaml"
    org.write_text(
        chart(tmp_path / "record").replace(
            f"command: {json.dumps(sys.executable)}", "command: no-such-mcp-server-binary"
        ),
        encoding="utf-8",
    )
    out = firm_cli(
        "run", str(org), "Pay the supplier", "--db", str(tmp_path / "f.db"), cwd=tmp_path
    )
    assert out.returncode != 0
    assert "MCP server 'ledger'" in out.stderr
    # The reason, in the server's own words (here the wrapper's: the command does not exist).
    assert "cannot start 'no-such-mcp-server-binary'" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_killed_run_leaves_no_server_behind(tmp_path: Path) -> None:
    record = tmp_path / "record"
    org = tmp_path / "company.yaml"
    org.write_text(chart(record), encoding="utf-8")
    model = ScriptedModel()
    model.when(agent="cfo", step=0).reply(calls(call("ledger_balance", account="ops")))
    model.when(agent="cfo", step=1).always(calls(call("ledger_slow", seconds=60)))
    with ModelServer(model) as server:
        env = server.env()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "firm",
                "run",
                str(org),
                "Pay",
                "--brain",
                "llm",
                "--db",
                str(tmp_path / "f.db"),
                "--workspace",
                str(tmp_path / "ws"),
            ],
            cwd=tmp_path,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + SUBPROCESS_GUARD
        while not any(e["tool"] == "slow" for e in executed(record)):
            assert proc.poll() is None, "firm run ended before the slow call"
            assert time.monotonic() < deadline, "the slow call never reached the server"
            time.sleep(0.1)
        pid = executed(record)[-1]["pid"]
        assert pid_alive(pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not pid_alive(pid), "the MCP server outlived the firm process that started it"


def test_tools_of_a_streamable_http_server(tmp_path: Path) -> None:
    record = tmp_path / "record"
    proc, port = listening(
        lambda port: subprocess.Popen(
            [sys.executable, str(SERVER), str(record), "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        "the MCP server",
    )
    try:
        model = ScriptedModel()
        model.when(agent="cfo", step=0).reply(
            calls(
                call("ledger_balance", account="ops"),
                call("ledger_transfer", account="ops", amount=120),
            )
        )
        model.when(agent="cfo", step=1).reply(calls(complete("Paid.")))
        root, _server, _ = run(tmp_path, chart(record, f"http://127.0.0.1:{port}/mcp"), model)
        assert root.status == "done", root.error
        ran = executed(record)
        assert [e["tool"] for e in ran] == ["balance", "transfer"]
        assert ran[1]["args"] == {"account": "ops", "amount": 120}
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_chart_without_mcp_servers_never_loads_the_sdk(tmp_path: Path) -> None:
    org = tmp_path / "company.yaml"
    org.write_text("company: X\nagents:\n  - {id: ceo, name: A, title: CEO}\n", encoding="utf-8")
    script = (
        "import sys\n"
        "from firm.cli.main import main\n"
        "try:\n"
        f"    main(['run', {str(org)!r}, 'Go', '--db', {str(tmp_path / 'f.db')!r}])\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
        "loaded = sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.'))\n"
        "assert not loaded, loaded\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "FIRM_DB"}
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr


def test_a_call_that_outlives_the_server_timeout_is_a_tool_error(tmp_path: Path) -> None:
    record = tmp_path / "record"
    model = ScriptedModel()
    model.when(agent="cfo", step=0).reply(calls(call("ledger_slow", seconds=5)))
    model.when(agent="cfo", step=1).reply(calls(complete("Gave up on the slow call.")))
    root, server, _ = run(tmp_path, chart(record).replace("timeout: 20", "timeout: 1"), model)
    assert root.status == "done", root.error
    assert any("did not answer within 1 s" in r for r in tool_results(server, "cfo"))
