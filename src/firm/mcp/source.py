"""MCP servers as a tool source: each server tool becomes a firm tool named SERVER.TOOL.

Such a tool is like any other: offered only when the agent's grant covers its name, checked
before the call (limits included), logged. The server is reached only by a call the check
allowed; a denied call never leaves firm.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from firm.errors import FirmError
from firm.mcp.config import ServerConfig
from firm.mcp.hub import Connection, McpHub
from firm.mcp.results import field, result_text
from firm.org import McpServerSpec, OrgChart
from firm.tools.registry import ToolContext, ToolDef
from firm.tools.schema import SchemaError

log = logging.getLogger(__name__)

MAX_TOOLS = 1000  # per server: a listing larger than this is cut, with a warning
DESCRIPTION_LIMIT = 2000


def firm_tool_name(server: str, tool: str) -> str:
    """`export-Report` on server `ledger` is `ledger.export_report`."""
    local = re.sub(r"[^a-z0-9_]+", "_", tool.lower()).strip("_") or "tool"
    if not local[0].isalpha():
        local = "t_" + local
    return f"{server}.{local}"


class WorkspaceFiles:
    """Saves a result's binary content into the calling session's workspace."""

    def __init__(self, ctx: ToolContext):
        self.ctx = ctx

    def save_bytes(self, path: str, data: bytes) -> str:
        self.ctx.workspace.write(path, data)
        rel = self.ctx.workspace.relative(path)
        self.ctx.wrote_file(rel)
        return rel


class McpServerSource:
    """One server of the chart's `mcp_servers:`."""

    def __init__(
        self,
        name: str,
        spec: McpServerSpec,
        hub: McpHub | None = None,
        base_dir: Path | None = None,
    ):
        self.base_dir = base_dir
        self.server = name
        self.spec = spec
        self.name = f"MCP server {name!r}"
        self._hub = hub
        self._conn: Connection | None = None

    def open(self) -> list[ToolDef]:
        config = ServerConfig.from_spec(self.server, self.spec, base_dir=self.base_dir)
        hub = self._hub or McpHub.shared()
        conn = hub.connection(config)
        conn.acquire()
        self._conn = conn
        listed = conn.tools()
        if len(listed) > MAX_TOOLS:
            log.warning(
                "%s lists %d tools; the first %d are used", self.name, len(listed), MAX_TOOLS
            )
        tools: list[ToolDef] = []
        seen: dict[str, str] = {}
        for mcp_tool in listed[:MAX_TOOLS]:
            name = firm_tool_name(self.server, mcp_tool.name)
            if name in seen:
                log.warning(
                    "%s: tools %r and %r are both %s; only the first is offered",
                    self.name,
                    seen[name],
                    mcp_tool.name,
                    name,
                )
                continue
            seen[name] = mcp_tool.name
            tool = self._tool(conn, name, mcp_tool)
            if tool is not None:
                tools.append(tool)
        local_names = {n.split(".", 1)[1] for n in seen}
        unknown = sorted(k for k in self.spec.limits if k.split(".", 1)[0] not in local_names)
        if unknown:
            raise FirmError(
                f"mcp_servers.{self.server}.limits: {', '.join(unknown)} names no tool of the "
                f"server (its tools: {', '.join(sorted(local_names))})"
            )
        return tools

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.release()

    def _tool(self, conn: Connection, name: str, mcp_tool: Any) -> ToolDef | None:
        remote = mcp_tool.name
        local = name.split(".", 1)[1]
        limits = {
            key.split(".", 1)[1]: ceiling
            for key, ceiling in self.spec.limits.items()
            if key.split(".", 1)[0] == local
        }
        description = mcp_tool.description or f"The {remote} tool of the {self.server} server."
        if len(description) > DESCRIPTION_LIMIT:
            description = description[:DESCRIPTION_LIMIT] + " …"
        server = self.server

        def call(arguments: dict[str, Any], ctx: ToolContext) -> str:
            result = conn.call(remote, arguments)
            return result_text(server, remote, result, WorkspaceFiles(ctx))

        schema = dict(field(mcp_tool, "inputSchema") or {"type": "object", "properties": {}})
        try:
            return ToolDef.from_schema(
                name, description, schema, call, limits=limits, takes_context=True
            )
        except SchemaError as exc:
            # One tool whose arguments firm cannot check is not offered; the others are.
            log.warning("%s: %s is not offered: %s", self.name, name, exc)
            return None


def server_sources(org: OrgChart, base_dir: Path | None = None) -> list[McpServerSource]:
    """One source per server of the chart; a stdio server runs in the chart's folder unless
    its entry says otherwise, so `args: [server.py]` means the file beside the chart."""
    return [
        McpServerSource(name, spec, base_dir=base_dir) for name, spec in org.mcp_servers.items()
    ]
