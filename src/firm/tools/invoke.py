"""Running a tool's body and describing a call: helpers of the session's checked path."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine
from typing import Any

from firm.tools.registry import ToolDef


def run_coroutine(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run an async tool to completion, also when the brain itself runs inside an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=run, name="firm-async-tool")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def to_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def summary(tool: ToolDef, args: dict[str, Any]) -> str:
    """A short, human line for the activity feed (the digest is what the audit relies on)."""
    if tool.name.startswith("files."):
        return str(args.get("path", "."))[:200]
    if tool.name == "delegate_task":
        return f"{args.get('assignee')}: {str(args.get('title'))[:150]}"
    if tool.name in ("complete_task", "fail_task"):
        return str(args.get("result") or args.get("reason") or "")[:200]
    return ", ".join(f"{k}={str(v)[:40]}" for k, v in list(args.items())[:4])
