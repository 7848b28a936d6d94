"""`firm mcp` driven by the MCP SDK's own client session, over stdio and streamable HTTP: give a
goal, wait for it, read its result and a file it wrote, follow its tasks, cancel one."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import THREE_LEVELS
from tests.support.ports import listening

pytestmark = pytest.mark.timeout(180)


def payload(result: Any) -> Any:
    assert not result.isError, result.content
    if result.structuredContent is not None:
        data = result.structuredContent
        return data.get("result", data) if set(data) == {"result"} else data
    return json.loads(result.content[0].text)


@contextlib.asynccontextmanager
async def stdio_session(params: StdioServerParameters) -> AsyncIterator[ClientSession]:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def http_session(url: str) -> AsyncIterator[ClientSession]:
    async with (
        streamable_http_client(url) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def firm_mcp_params(tmp_path: Path, *extra: str) -> StdioServerParameters:
    org = tmp_path / "company.yaml"
    org.write_text(THREE_LEVELS, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "FIRM_DB"}
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "firm",
            "mcp",
            str(org),
            "--db",
            str(tmp_path / "firm.db"),
            "--workspace",
            str(tmp_path / "ws"),
            *extra,
        ],
        env=env,
        cwd=str(tmp_path),
    )


async def give_wait_read(client: ClientSession) -> None:
    names = {t.name for t in (await client.list_tools()).tools}
    assert {"give_goal", "list_tasks", "get_task", "cancel_task", "read_file"} <= names

    done = payload(
        await client.call_tool(
            "give_goal", {"goal": "Launch an AI note-taking app", "wait_seconds": 120}
        )
    )
    assert done["status"] == "done", done
    assert done["result"] and done["files"]

    task = payload(await client.call_tool("get_task", {"id": done["id"]}))
    assert len(task["subtasks"]) == 6
    assert {t["status"] for t in task["subtasks"]} == {"done"}

    listed = payload(await client.call_tool("list_tasks", {"root": done["id"]}))
    assert listed["total"] == 7

    text = await client.call_tool("read_file", {"path": done["files"][0]})
    assert not text.isError and text.content[0].text.strip()

    missing = await client.call_tool("get_task", {"id": "T-nosuchtask"})
    assert missing.isError and "no task" in missing.content[0].text


def test_a_goal_given_over_stdio_is_worked_and_read_back(tmp_path: Path) -> None:
    async def main() -> None:
        async with stdio_session(firm_mcp_params(tmp_path, "--sim-latency", "0.02")) as client:
            await give_wait_read(client)

    asyncio.run(main())
    # The same store the CLI reads: the goal is there for `firm tasks` too.
    out = subprocess.run(
        [sys.executable, "-m", "firm", "tasks", "--db", str(tmp_path / "firm.db"), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert len(json.loads(out.stdout)) == 7


def test_a_running_goal_is_cancelled_over_mcp(tmp_path: Path) -> None:
    async def main() -> None:
        async with stdio_session(firm_mcp_params(tmp_path, "--sim-latency", "30")) as client:
            started = payload(await client.call_tool("give_goal", {"goal": "Plan the offsite"}))
            assert started["status"] in ("todo", "in_progress")
            cancelled = payload(await client.call_tool("cancel_task", {"id": started["id"]}))
            assert started["id"] in cancelled["cancelled"]
            after = payload(await client.call_tool("get_task", {"id": started["id"]}))
            assert after["status"] == "cancelled"

    asyncio.run(main())


def test_firm_mcp_over_streamable_http(tmp_path: Path) -> None:
    def start(port: int) -> subprocess.Popen[bytes]:
        params = firm_mcp_params(tmp_path, "--sim-latency", "0.02", "--http", "--port", str(port))
        return subprocess.Popen(
            [params.command, *params.args],
            cwd=tmp_path,
            env=params.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    proc, port = listening(start, "firm mcp --http")
    try:

        async def main() -> None:
            async with http_session(f"http://127.0.0.1:{port}/mcp") as client:
                await give_wait_read(client)

        asyncio.run(main())
    finally:
        proc.terminate()
        proc.wait(30)
