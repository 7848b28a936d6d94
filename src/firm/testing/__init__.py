"""Test a company without a key: a scripted model behind a real chat-completions server.

    from firm import Firm, load_org
    from firm.testing import ModelServer, ScriptedModel, calls, complete, delegate

    model = ScriptedModel()
    model.when(agent="ceo", woken=False).reply(calls(delegate("cto", "Plan the app")))
    with ModelServer(model) as server, Firm("test.db") as firm:
        root = firm.run(load_org("company.yaml"), "Launch", brain="llm",
                        brain_options=server.brain_options())
        assert root.status == "done"

Or replace the brain itself with one Python function per agent: FunctionBrain.

See docs/testing.md.
"""

from firm.clock import ManualClock
from firm.testing.function import FunctionBrain, SessionRecord
from firm.testing.script import (
    ModelRequest,
    Reply,
    Rule,
    ScriptedModel,
    ToolCallSpec,
    call,
    call_raw,
    calls,
    complete,
    delegate,
    drop,
    error,
    fail,
    hang,
    slow,
    text,
    write_file,
)
from firm.testing.server import MODEL_NAME, ModelServer, RecordedRequest

__all__ = [
    "MODEL_NAME",
    "FunctionBrain",
    "ManualClock",
    "ModelRequest",
    "ModelServer",
    "RecordedRequest",
    "Reply",
    "Rule",
    "ScriptedModel",
    "SessionRecord",
    "ToolCallSpec",
    "call",
    "call_raw",
    "calls",
    "complete",
    "delegate",
    "drop",
    "error",
    "fail",
    "hang",
    "slow",
    "text",
    "write_file",
]
