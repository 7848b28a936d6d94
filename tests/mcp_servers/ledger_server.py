"""A real MCP server for the tests, built with the SDK's own server class (FastMCP).

    python ledger_server.py RECORD_DIR            stdio
    python ledger_server.py RECORD_DIR --port N   streamable HTTP on 127.0.0.1:N

Every tool body that runs appends one JSON line to RECORD_DIR/executed.jsonl, so a test can
tell what reached the server and what did not; the server's pid goes to RECORD_DIR/pid.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from pathlib import Path

from mcp.server.fastmcp import FastMCP, Image

RECORD = Path(sys.argv[1])
RECORD.mkdir(parents=True, exist_ok=True)
(RECORD / "pid").write_text(str(os.getpid()))

# A 1×1 transparent PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

PORT = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 8000
app = FastMCP("ledger", host="127.0.0.1", port=PORT, log_level="WARNING")


def record(tool: str, **args: object) -> None:
    with (RECORD / "executed.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"tool": tool, "args": args, "pid": os.getpid()}) + "\n")


@app.tool()
def balance(account: str) -> dict:
    """The balance of an account."""
    record("balance", account=account)
    return {"account": account, "balance": 1250.5}


@app.tool()
def transfer(account: str, amount: float) -> str:
    """Move money out of an account."""
    record("transfer", account=account, amount=amount)
    return f"moved {amount:.2f} from {account}"


@app.tool(name="export-Report")
def export_report(title: str) -> str:
    """Export a report as text."""
    record("export-Report", title=title)
    return f"# {title}\nall figures in order"


@app.tool()
def chart() -> object:
    """Draw a chart (an image)."""
    record("chart")
    return Image(data=PIXEL, format="png")


@app.tool()
def refuse(why: str) -> str:
    """Always fails, with the reason given."""
    record("refuse", why=why)
    raise ValueError(f"refused: {why}")


@app.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    record("slow", seconds=seconds)
    time.sleep(seconds)
    return "awake"


@app.tool()
def crash() -> str:
    """The server dies in the middle of the call."""
    record("crash")
    os._exit(3)


if __name__ == "__main__":
    app.run("streamable-http" if "--port" in sys.argv else "stdio")
