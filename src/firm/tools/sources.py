"""Where a company's tools come from: tool sources.

A `ToolSource` yields the ToolDefs it provides once opened, and is closed when the engine that
opened it stops — some sources are processes (an MCP server) or connections. The user's
`tool_modules` in the org chart are the first kind (ModuleSource). Other kinds register a
factory that reads the org chart and returns the sources it names:

    register_tool_source("mcp", mcp_sources)     # mcp_sources(org, base_dir) -> [ToolSource]

`open_sources` opens a chart's sources and hands back their tools; a source that fails to
open fails the company with its name and the reason, after closing those already open.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol, runtime_checkable

from firm.errors import FirmError
from firm.org import OrgChart
from firm.tools.registry import ToolDef, import_tool_module, tools_in_module


@runtime_checkable
class ToolSource(Protocol):
    """Something that provides tools to a company."""

    name: str  # for messages: "module acme.crm", "mcp server github"

    def open(self) -> Iterable[ToolDef]:
        """Start whatever the tools need and return them. Called once per engine."""
        ...

    def close(self) -> None:
        """Release what open started. Called once, also after a failed open of another source."""
        ...


class ModuleSource:
    """The `@firm.tool` functions of one Python module: a dotted name, or a file path relative
    to the org chart's folder."""

    def __init__(self, spec: str, base_dir: Path | None = None):
        self.spec = spec
        self.base_dir = base_dir
        self.name = f"tool module {spec}"

    def open(self) -> list[ToolDef]:
        return tools_in_module(import_tool_module(self.spec, self.base_dir))

    def close(self) -> None:
        pass


class StaticSource:
    """A fixed list of tools (built in Python, e.g. with ToolDef.from_schema)."""

    def __init__(self, name: str, tools: Iterable[ToolDef]):
        self.name = name
        self._tools = list(tools)

    def open(self) -> list[ToolDef]:
        return list(self._tools)

    def close(self) -> None:
        pass


SourceFactory = Callable[[OrgChart, Path | None], Iterable[ToolSource]]

_FACTORIES: dict[str, SourceFactory] = {}


def register_tool_source(kind: str, factory: SourceFactory) -> Callable[[], None]:
    """Make every company ask `factory(org, base_dir)` for the sources of this kind its chart
    names. Registering a kind again replaces its factory. Returns a function that removes it."""
    _FACTORIES[kind] = factory

    def remove() -> None:
        if _FACTORIES.get(kind) is factory:
            del _FACTORIES[kind]

    return remove


def module_sources(org: OrgChart, base_dir: Path | None) -> list[ToolSource]:
    return [ModuleSource(spec, base_dir) for spec in org.tool_modules]


register_tool_source("modules", module_sources)


def mcp_sources(org: OrgChart, base_dir: Path | None) -> list[ToolSource]:
    """The chart's `mcp_servers:`; the MCP SDK is imported only when a chart names one."""
    if not org.mcp_servers:
        return []
    try:
        from firm.mcp.source import server_sources
    except ImportError as exc:
        raise FirmError(
            f"the chart names MCP servers ({', '.join(org.mcp_servers)}), which need the "
            f"extra: pip install 'firm[mcp]' ({exc})"
        ) from None
    return list(server_sources(org, base_dir))


register_tool_source("mcp", mcp_sources)


def sources_for(org: OrgChart, base_dir: Path | None) -> list[ToolSource]:
    """Every source the chart names, of every registered kind, in registration order."""
    found: list[ToolSource] = []
    for factory in list(_FACTORIES.values()):
        found.extend(factory(org, base_dir))
    return found


def open_sources(sources: list[ToolSource]) -> list[ToolDef]:
    """Open each source and collect its tools; on a failure close the ones opened and raise."""
    tools: list[ToolDef] = []
    opened: list[ToolSource] = []
    try:
        for source in sources:
            opened.append(source)
            tools.extend(source.open())
    except FirmError:
        close_sources(opened)
        raise
    except Exception as exc:
        close_sources(opened)
        raise FirmError(f"{opened[-1].name} cannot start: {exc}") from exc
    return tools


def close_sources(sources: Iterable[ToolSource]) -> None:
    """Close each source; one that fails to close does not keep the others open."""
    errors = []
    for source in sources:
        try:
            source.close()
        except Exception as exc:  # closing is best effort: report, go on
            errors.append(f"{source.name}: {exc}")
    if errors:
        raise FirmError("tool sources failed to close: " + "; ".join(errors))
