"""Tools: definitions and registry, sources, the workspace, and the built-in tools."""

from firm.tools.crewai_adapter import from_crewai
from firm.tools.registry import (
    ToolContext,
    ToolDef,
    ToolRegistry,
    make_tool,
    schema_tool,
    tool,
)
from firm.tools.schema import SchemaError
from firm.tools.sources import (
    ModuleSource,
    StaticSource,
    ToolSource,
    register_tool_source,
)

__all__ = [
    "ModuleSource",
    "SchemaError",
    "StaticSource",
    "ToolContext",
    "ToolDef",
    "ToolRegistry",
    "ToolSource",
    "from_crewai",
    "make_tool",
    "register_tool_source",
    "schema_tool",
    "tool",
]
