"""Any CrewAI tool as a firm tool: `from_crewai(tool, name="web.search")`.

The result is an ordinary ToolDef (built by schema_tool from the tool's argument schema), so
it is offered only where a grant covers its name, checked, limited and audited like every
other tool, and usable by any brain. This module reads the tool through its public surface
(name, description, args_schema, run) and never imports crewai itself.
"""

from __future__ import annotations

import re
from typing import Any

from firm.errors import FirmError
from firm.tools.registry import ToolDef, schema_tool


def from_crewai(
    tool: Any,
    name: str | None = None,
    *,
    description: str | None = None,
    limits: dict[str, str] | None = None,
) -> ToolDef:
    """A firm tool that runs the CrewAI tool `tool` (a `crewai.tools.BaseTool`).

    `name` is the dotted name grants refer to (default: `crewai.<the tool's own name>`);
    `limits` bounds number arguments by a grant's ceilings, as for `@firm.tool`.
    """
    schema_of = getattr(getattr(tool, "args_schema", None), "model_json_schema", None)
    if not callable(getattr(tool, "run", None)) or schema_of is None:
        raise FirmError(
            f"from_crewai needs a CrewAI tool (a crewai.tools.BaseTool), not {type(tool).__name__}"
        )
    own = str(getattr(tool, "name", "") or type(tool).__name__)
    dotted = name or "crewai." + (re.sub(r"[^a-z0-9]+", "_", own.lower()).strip("_") or "tool")
    schema = schema_of()
    if not isinstance(schema, dict):
        raise FirmError(f"tool {dotted!r}: its CrewAI args_schema gave no JSON schema")

    def run(arguments: dict[str, Any]) -> Any:
        result = tool.run(**arguments)
        return result if isinstance(result, str) else str(result)

    return schema_tool(
        dotted,
        description or str(getattr(tool, "description", "") or f"The {own} tool."),
        schema,
        run,
        limits=limits,
    )
