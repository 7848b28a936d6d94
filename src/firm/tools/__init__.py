"""Tools: definitions and registry, the workspace, and the built-in tools."""

from firm.tools.registry import ToolContext, ToolDef, ToolRegistry, make_tool, tool

__all__ = ["ToolContext", "ToolDef", "ToolRegistry", "make_tool", "tool"]
