"""The Model Context Protocol: MCP servers as tool sources, and firm as an MCP server.

Needs the `mcp` extra (`pip install 'firm[mcp]'`); nothing here is imported by `import firm`.

- config.py   the chart's `mcp_servers:` entries and `${VAR}` expansion (pure data)
- child.py    the wrapper a stdio server is started through, so it dies with firm
- hub.py      one connection per server per process: started on first need, shared, restarted
- results.py  an MCP tool result as what a model reads (text, JSON, files saved to the workspace)
- source.py   the ToolSource that makes each server tool a firm tool named SERVER.TOOL
- serve.py    `firm mcp`: a company served to MCP clients
"""
