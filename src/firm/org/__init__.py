"""The org chart: its model (chart.py) and reading one from YAML (loading.py)."""

from firm.org.chart import (
    AGENT_ID,
    TOOL_PATTERN,
    AgentSpec,
    ApprovalNeed,
    ApprovalRule,
    LLMConfig,
    McpServerSpec,
    OrgChart,
    parse_duration,
)
from firm.org.loading import load_org, parse_org, top_agent

__all__ = [
    "AGENT_ID",
    "TOOL_PATTERN",
    "AgentSpec",
    "ApprovalNeed",
    "ApprovalRule",
    "LLMConfig",
    "McpServerSpec",
    "OrgChart",
    "load_org",
    "parse_duration",
    "parse_org",
    "top_agent",
]
