"""OpenTelemetry traces, collected by a real OTLP/HTTP receiver on loopback: the span tree of
a 3-level run, model and tool spans with their GenAI attributes and authority verdicts, one
trace across a kill -9 and resume, and nothing at all when tracing is off."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from firm import Firm
from firm.org import parse_org
from firm.testing import ModelServer, ScriptedModel, call, calls, complete
from tests.conftest import THREE_LEVELS
from tests.support import SUBPROCESS_GUARD, firm_cli
from tests.telemetry.otlp_receiver import OtlpReceiver, Span

pytestmark = pytest.mark.timeout(240)

MANAGERS = {"ceo", "cto", "cmo"}
LEAVES = {"gabriel", "hana", "maya", "omar"}


def by_name(spans: list[Span], prefix: str) -> list[Span]:
    return [s for s in spans if s.name.startswith(prefix)]


def chart(tmp_path: Path) -> Path:
    org = tmp_path / "company.yaml"
    org.write_text(THREE_LEVELS, encoding="utf-8")
    return org


def test_a_three_level_run_is_one_trace_with_sessions_under_their_delegations(
    tmp_path: Path,
) -> None:
    with OtlpReceiver() as receiver:
        out = firm_cli(
            "run", str(chart(tmp_path)), "Launch an AI note-taking app",
            "--db", str(tmp_path / "f.db"), "--workspace", str(tmp_path / "ws"),
            cwd=tmp_path, env=receiver.env(),
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        spans = receiver.wait_for(lambda s: any(x.name.startswith("goal ") for x in s))

    assert len({s.trace_id for s in spans}) == 1, "a goal is one trace"
    ids = {s.span_id: s for s in spans}
    assert len(ids) == len(spans), "a span was exported twice"
    (goal,) = by_name(spans, "goal ")
    assert goal.parent_id == "" and goal.attributes["firm.outcome"] == "completed"

    sessions = by_name(spans, "invoke_agent ")
    agents = Counter(s.attributes["gen_ai.agent.id"] for s in sessions)
    # Each manager works twice (delegate, then merge); each leaf once.
    assert agents == Counter({**{m: 2 for m in MANAGERS}, **{leaf: 1 for leaf in LEAVES}})
    delegations = {s.span_id: s for s in by_name(spans, "delegate ")}
    assert len(delegations) == 6
    for s in sessions:
        if s.attributes["gen_ai.agent.id"] == "ceo":
            assert s.parent_id == goal.span_id
            continue
        # A subtask's session sits under the delegation that made the subtask, and that
        # delegation under the manager's session that delegated.
        delegation = delegations[s.parent_id]
        assert delegation.attributes["firm.task.id"] == s.attributes["firm.task.id"]
        manager = ids[delegation.parent_id]
        assert manager.name.startswith("invoke_agent ")
        assert s.start >= delegation.start >= manager.start

    tools = by_name(spans, "execute_tool ")
    writes = [t for t in tools if t.attributes["gen_ai.tool.name"] == "files.write"]
    assert len(writes) >= len(LEAVES)
    # Every task's complete_task, logged inside its `completed` entry, is a span of its own.
    ended = [
        t.attributes["firm.task.id"]
        for t in tools
        if t.attributes["gen_ai.tool.name"] == "complete_task"
    ]
    assert sorted(ended) == sorted({s.attributes["firm.task.id"] for s in sessions})
    for t in tools:
        assert t.attributes["firm.authority.verdict"] == "allowed"
        assert ids[t.parent_id].name.startswith("invoke_agent ")
        assert isinstance(t.attributes["firm.seq"], int)


def test_model_and_tool_spans_carry_genai_attributes_and_the_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    org = parse_org(
        """\
company: Solo
agents:
  - {id: ceo, name: Ava, title: Chief Executive Officer, tools: ["files.read"]}
""",
        "company.yaml",
    )
    model = ScriptedModel()
    model.when(agent="ceo", step=0).reply(calls(call("files_write", path="x.md", content="x")))
    model.when(agent="ceo", step=1).reply(calls(complete("Done without writing.")))
    with OtlpReceiver() as receiver:
        for k, v in receiver.env().items():
            monkeypatch.setenv(k, v)
        with ModelServer(model) as server, Firm(tmp_path / "f.db") as f:
            root = f.run(
                org, "Say hello", brain="llm", brain_options=server.brain_options(),
                workspace=tmp_path / "ws", timeout=60,
            )  # fmt: skip
            assert root.status == "done", root.error
        spans = receiver.wait_for(lambda s: any(x.name.startswith("goal ") for x in s))

    chats = by_name(spans, "chat ")
    assert len(chats) == 2
    for c in chats:
        assert c.attributes["gen_ai.operation.name"] == "chat"
        assert c.attributes["gen_ai.request.model"]
        assert c.attributes["gen_ai.usage.input_tokens"] > 0
        assert c.attributes["gen_ai.usage.output_tokens"] > 0
        assert c.attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
        assert c.end >= c.start
    (denied,) = [s for s in by_name(spans, "execute_tool ") if s.name.endswith("files.write")]
    assert denied.attributes["firm.authority.verdict"] == "denied"
    assert "files.write" in denied.attributes["firm.authority.reason"]
    assert denied.status_code == 2  # ERROR
    # Prompts and completions stay out unless asked for.
    assert not any("gen_ai.input.messages" in s.attributes for s in spans)


def test_a_killed_and_resumed_run_adds_to_the_same_trace(tmp_path: Path) -> None:
    org = chart(tmp_path)
    db = str(tmp_path / "f.db")
    with OtlpReceiver() as receiver:
        env = {**os.environ, **receiver.env()}
        env.pop("FIRM_DB", None)
        proc = subprocess.Popen(
            [sys.executable, "-m", "firm", "run", str(org), "Launch an AI note-taking app",
             "--db", db, "--workspace", str(tmp_path / "ws"), "--sim-latency", "0.4"],
            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

        # Kill it once the leaves are at work, with the managers waiting on them: every one of
        # the six delegations exported (a span still in the killed process's buffer is lost
        # with it), the last leaves still in their 0.4 s turn.
        def six_delegations(spans: list[Span]) -> bool:
            return len([x for x in spans if x.name.startswith("delegate ")]) >= 6

        assert six_delegations(receiver.wait_for(six_delegations, SUBPROCESS_GUARD))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        before = {s.span_id for s in receiver.spans()}
        out = firm_cli("resume", "--db", db, cwd=tmp_path, env=receiver.env())
        assert out.returncode == 0, out.stderr
        spans = receiver.wait_for(lambda s: any(x.name.startswith("goal ") for x in s))

    assert len({s.trace_id for s in spans}) == 1, "the resumed run started another trace"
    after = [s for s in spans if s.span_id not in before]
    assert after, "the resumed process exported nothing"
    known = {s.span_id for s in spans}
    for s in by_name(after, "invoke_agent "):
        if s.attributes["gen_ai.agent.id"] != "ceo":
            # Its delegation was exported by the process that was killed.
            assert s.parent_id in known
    done = {s.attributes["firm.task.id"] for s in by_name(spans, "invoke_agent ")}
    assert len(done) == 7


def test_nothing_is_exported_and_nothing_loaded_when_tracing_is_off(tmp_path: Path) -> None:
    org = chart(tmp_path)
    with OtlpReceiver() as receiver:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.pop("FIRM_DB", None)
        script = (
            "import sys\n"
            "from firm.cli.main import main\n"
            "try:\n"
            f"    main(['run', {str(org)!r}, 'Go', '--db', {str(tmp_path / 'f.db')!r}])\n"
            "except SystemExit as e:\n"
            "    assert e.code == 0, e.code\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
            "assert not loaded, loaded\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        time.sleep(0.5)
        assert receiver.collected.requests == 0
