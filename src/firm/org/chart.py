"""The org chart's model: who the agents are, who reports to whom, and what each may do.
Pure data; each field checked as it is read (loading.py reads a file into it)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cached_property
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from firm.org.index import ChartIndex, memo
from firm.pricing import MAX_PRICED_MODELS, ModelPrice
from firm.yamlproblems import YamlPath

AGENT_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
TOOL_PATTERN = re.compile(r"^[A-Za-z0-9_*?\[\]-]+(\.[A-Za-z0-9_*?\[\]-]+)*$")

ShortText = Annotated[str, Field(min_length=1, max_length=200)]
LongText = Annotated[str, Field(max_length=20_000)]
# A brain's registered name (simulation, llm, crewai, …); checked against the registry when
# the company is built, since brains are registered by layers above this one.
BrainName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,39}$")]


class _Strict(BaseModel):
    # NaN and infinity are not numbers a ceiling or a time can be: refused with the rest.
    model_config = ConfigDict(
        extra="forbid", str_strip_whitespace=True, frozen=True, allow_inf_nan=False
    )


class LLMConfig(_Strict):
    """Model settings; the company sets defaults, an agent may override any of them."""

    model: ShortText | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    max_iterations: Annotated[int, Field(ge=1, le=1000)] | None = None
    max_tokens: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    base_url: ShortText | None = None
    api_key_env: ShortText | None = None
    timeout: Annotated[float, Field(gt=0, le=3600)] | None = None
    # Send tool schemas as strict JSON schemas (OpenAI and compatible servers that support it
    # then guarantee arguments match); off by default, as many local servers reject it.
    strict_tools: bool | None = None
    # USD per million tokens by model name, for the office's cost estimates; the company's
    # block only (an agent's `llm:` is refused it), and never sent to a model.
    prices: Annotated[dict[ShortText, ModelPrice], Field(max_length=MAX_PRICED_MODELS)] | None = (
        None
    )

    def merged(self, override: LLMConfig | None) -> LLMConfig:
        if override is None:
            return self
        data = self.model_dump()
        data.update({k: v for k, v in override.model_dump().items() if v is not None})
        return LLMConfig(**data)


MCP_SERVER_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


class McpServerSpec(_Strict):
    """An MCP server whose tools the company may use, named SERVER.TOOL. Either a command
    firm starts (stdio) or a URL (streamable HTTP). `${VAR}` in args, env, url and headers
    is taken from firm's environment when the server starts; the chart keeps the
    placeholder, so a stored chart never holds the secret."""

    command: ShortText | None = None
    args: list[Annotated[str, Field(max_length=2000)]] = Field(default_factory=list)
    env: dict[str, Annotated[str, Field(max_length=4000)]] = Field(default_factory=dict)
    cwd: ShortText | None = None
    url: Annotated[str, Field(min_length=1, max_length=2000)] | None = None
    headers: dict[str, Annotated[str, Field(max_length=4000)]] = Field(default_factory=dict)
    timeout: Annotated[float, Field(gt=0, le=3600)] = 30.0
    # A ceiling on a numeric argument, like @firm.tool's limits: {"transfer.amount": "max_amount"}
    # (TOOL.ARGUMENT, with the tool named as firm names it) is checked against the caller's
    # `max_amount` before the call leaves firm.
    limits: dict[str, ShortText] = Field(default_factory=dict)

    @field_validator("limits")
    @classmethod
    def _limit_keys(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if not re.fullmatch(r"[a-z][a-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*", key):
                raise ValueError(f"{key!r} is not TOOL.ARGUMENT, like 'transfer.amount'")
        return v

    def model_post_init(self, __context: Any) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a server firm starts) or url, not both")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("args, env and cwd are for a command; a url server takes headers")
        if self.command is not None and self.headers:
            raise ValueError("headers are for a url server; a command takes env")


def _check_tool_patterns(patterns: list[str] | None) -> list[str] | None:
    if patterns is None:
        return None
    for p in patterns:
        if not TOOL_PATTERN.match(p):
            raise ValueError(
                f"{p!r} is not a tool name or glob (dotted names like 'files.read' or 'crm.*')"
            )
    return patterns


DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
MAX_APPROVAL_TIMEOUT = 365 * 86400


def parse_duration(value: Any) -> float:
    """Seconds, from a number or text like '90s', '30m', '2h', '1d'."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        m = DURATION.match(str(value))
        if m is None:
            raise ValueError(f"{value!r} is not a duration (a number of seconds, or 30m, 2h, 1d)")
        seconds = float(m.group(1)) * _UNIT[m.group(2)]
    if not 0 < seconds <= MAX_APPROVAL_TIMEOUT:
        raise ValueError(f"{value!r} is not a duration between 1 second and 365 days")
    return seconds


class ApprovalRule(_Strict):
    """Calls to these tools wait for a person's approval; with `delegations: true`, so do the
    delegations of each turn (a plan); `agents` narrows the rule to those agents. Undecided
    after `timeout`, denied."""

    tools: Annotated[list[str], Field(max_length=1000)] = Field(default_factory=list)
    agents: Annotated[list[str], Field(max_length=100_000)] | None = None
    delegations: bool = False
    timeout: float | None = None

    @field_validator("tools")
    @classmethod
    def _tool_patterns(cls, v: list[str]) -> list[str]:
        return _check_tool_patterns(v) or []

    @model_validator(mode="after")
    def _asks_for_something(self) -> ApprovalRule:
        if not self.tools and not self.delegations:
            raise ValueError(
                "a rule needs `tools:` or `delegations: true` (what waits for a person)"
            )
        return self

    def covers(self, agent_id: str) -> bool:
        return self.agents is None or agent_id in self.agents

    @field_validator("timeout", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> float | None:
        return None if v is None else parse_duration(v)


@dataclass(frozen=True)
class ApprovalNeed:
    """Why a call waits for a person: the rule that matched, and how long it may wait."""

    rule: str  # "approvals[0]" or "agent cfo"
    timeout: float | None


def _matches(patterns: list[str], name: str) -> bool:
    # Globs as authority reads them (authority/scopes.py: fnmatch's syntax, case-sensitive).
    return any(fnmatchcase(name, p) for p in patterns)


class AgentSpec(_Strict):
    id: str
    name: ShortText
    title: ShortText
    reports_to: str | None = None
    instructions: LongText = ""
    tools: list[str] | None = None
    can_grant: list[str] = Field(default_factory=list)
    limits: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=dict)
    ttl: Annotated[float, Field(gt=0, le=10 * 365 * 86400)] | None = None
    budget_tokens: Annotated[int, Field(gt=0)] | None = None
    llm: LLMConfig | None = None
    brain: BrainName | None = None  # this agent's brain, whatever the run's (e.g. crewai)
    # Tools whose calls by this agent, or anyone under it, wait for a person's approval.
    approvals: list[str] = Field(default_factory=list)
    # Whether this agent gets the ask_human tool (None: the company's `ask_human`).
    ask_human: bool | None = None

    @field_validator("id", "reports_to")
    @classmethod
    def _agent_id(cls, v: str | None) -> str | None:
        if v is not None and not AGENT_ID.match(v):
            raise ValueError(
                f"{v!r} is not a valid agent id (lowercase letters, digits, '-' and '_', "
                "starting with a letter or digit, at most 63 characters)"
            )
        return v

    @field_validator("tools", "can_grant", "approvals")
    @classmethod
    def _tool_patterns(cls, v: list[str] | None) -> list[str] | None:
        return _check_tool_patterns(v)

    @field_validator("llm")
    @classmethod
    def _no_prices(cls, v: LLMConfig | None) -> LLMConfig | None:
        if v is not None and v.prices is not None:
            raise ValueError("prices belong in the company's llm block, not an agent's")
        return v


class OrgChart(_Strict):
    company: ShortText
    description: LongText = ""
    max_concurrent: Annotated[int, Field(ge=1, le=1024)] = 4
    workspace: ShortText | None = None
    default_tools: list[str] = Field(default_factory=lambda: ["files.*"])
    tool_modules: list[ShortText] = Field(default_factory=list)
    mcp_servers: dict[str, McpServerSpec] = Field(default_factory=dict)
    on_denial: Literal["deny", "revoke"] = "deny"
    llm: LLMConfig | None = None
    brain: BrainName | None = None  # every agent's brain unless it names its own
    approvals: Annotated[list[ApprovalRule], Field(max_length=1000)] = Field(default_factory=list)
    ask_human: bool = (
        False  # every agent may ask a person a question (ask_human), unless it says no
    )
    agents: Annotated[list[AgentSpec], Field(min_length=1, max_length=100_000)]

    _lines: dict[YamlPath, int] = PrivateAttr(default_factory=dict)
    _file: str = PrivateAttr(default="<org chart>")
    _text: str | None = PrivateAttr(default=None)  # the YAML it was parsed from, if any

    @field_validator("mcp_servers")
    @classmethod
    def _mcp_server_names(cls, v: dict[str, McpServerSpec]) -> dict[str, McpServerSpec]:
        for name in v:
            if not MCP_SERVER_NAME.match(name):
                raise ValueError(
                    f"{name!r} is not a server name: lowercase letters, digits and _ (its "
                    "tools are named SERVER.TOOL)"
                )
        return v

    @field_validator("default_tools")
    @classmethod
    def _tool_patterns(cls, v: list[str]) -> list[str]:
        return _check_tool_patterns(v) or []

    @cached_property
    def _index(self) -> ChartIndex:
        # Kept in the instance's __dict__ once built, where reading it is a plain attribute
        # hit; a pydantic private attribute is read through BaseModel.__getattr__, several
        # times slower, and these are read at every tool call. The chart is frozen: the
        # index never goes stale.
        return ChartIndex(self.agents, self.default_tools)

    @property
    def source(self) -> str:
        return self._file

    def agent(self, agent_id: str) -> AgentSpec:
        try:
            return self._index.by_id[agent_id]
        except KeyError:
            raise KeyError(f"no agent {agent_id!r} in the org chart") from None

    def has_agent(self, agent_id: str) -> bool:
        return agent_id in self._index.by_id

    def reports(self, agent_id: str) -> list[AgentSpec]:
        return list(self._index.reports.get(agent_id, ()))

    def manager(self, agent_id: str) -> AgentSpec | None:
        boss = self.agent(agent_id).reports_to
        return self._index.by_id.get(boss) if boss else None

    def roots(self) -> list[AgentSpec]:
        return [a for a in self.agents if a.reports_to is None]

    def chain_of_command(self, agent_id: str) -> list[str]:
        """The agent's managers, nearest first."""
        chain = memo(self._index.chains, agent_id, lambda: self._chain(agent_id))
        return list(chain)

    def _chain(self, agent_id: str) -> tuple[str, ...]:
        chain: list[str] = []
        boss = self.agent(agent_id).reports_to
        while boss is not None:
            chain.append(boss)
            boss = self.agent(boss).reports_to
        return tuple(chain)

    def approval_for(self, agent_id: str, tool_name: str) -> ApprovalNeed | None:
        """Whether a call by this agent to this tool waits for a person: a company-wide rule
        naming the tool, or an `approvals:` entry of the agent or of any manager above it.
        When several match, the shortest timeout applies."""
        if not self.approvals and not self._index.agent_approvals:
            return None
        key = (agent_id, tool_name)
        return memo(self._index.approvals, key, lambda: self._approval_for(agent_id, tool_name))

    def _approval_for(self, agent_id: str, tool_name: str) -> ApprovalNeed | None:
        needs = [
            ApprovalNeed(f"approvals[{i}]", rule.timeout)
            for i, rule in enumerate(self.approvals)
            if _matches(rule.tools, tool_name) and rule.covers(agent_id)
        ]
        if self.has_agent(agent_id):
            for who in [agent_id, *self._chain(agent_id)]:
                if _matches(self.agent(who).approvals, tool_name):
                    needs.append(ApprovalNeed(f"agent {who}", None))
        if not needs:
            return None
        timeouts = [n.timeout for n in needs if n.timeout is not None]
        return ApprovalNeed(needs[0].rule, min(timeouts) if timeouts else None)

    def plan_for(self, agent_id: str) -> ApprovalNeed | None:
        """Whether this agent's delegations wait for a person, a turn's worth at a time (a
        plan): a rule with `delegations: true` that covers it. The shortest timeout applies."""
        needs = [
            ApprovalNeed(f"approvals[{i}]", rule.timeout)
            for i, rule in enumerate(self.approvals)
            if rule.delegations and rule.covers(agent_id)
        ]
        if not needs:
            return None
        timeouts = [n.timeout for n in needs if n.timeout is not None]
        return ApprovalNeed(needs[0].rule, min(timeouts) if timeouts else None)

    def may_ask_human(self, agent_id: str) -> bool:
        """Whether the agent is offered ask_human: its own `ask_human:`, else the company's."""
        if not self.has_agent(agent_id):
            return False
        own = self.agent(agent_id).ask_human
        return self.ask_human if own is None else own

    def is_report(self, manager_id: str, agent_id: str) -> bool:
        """True when agent_id reports directly to manager_id."""
        return self.has_agent(agent_id) and self.agent(agent_id).reports_to == manager_id

    def llm_for(self, agent_id: str) -> LLMConfig:
        base = self.llm or LLMConfig()
        return base.merged(self.agent(agent_id).llm)

    def model_of(self, agent_id: str, run_model: str | None = None) -> str | None:
        """The model an agent's calls go to, as the llm brain settles it from the chart: the
        agent's own, else the run's --model, else the company's; None when none is set."""
        own = self.agent(agent_id).llm if self.has_agent(agent_id) else None
        company = self.llm
        for model in (own and own.model, run_model, company and company.model):
            if isinstance(model, str) and model.strip():
                return model.strip()
        return None

    def tools_of(self, agent_id: str) -> list[str]:
        """What the agent may call itself: its `tools:`, or the company's default_tools."""
        try:
            return list(self._index.tools[agent_id])
        except KeyError:
            raise KeyError(f"no agent {agent_id!r} in the org chart") from None

    def to_yaml(self) -> str:
        """The chart as YAML: the text it was parsed from, else as it serializes."""
        return self._yaml

    @cached_property
    def _yaml(self) -> str:
        # Every run records its chart, and the representer is Python even over libyaml
        # (0.7–2 ms for 31 agents, on the path from a submit to its first session): a parsed
        # chart's own text says the same (it parses to this chart), and is kept as written.
        if self._text is not None:
            return self._text
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        return yaml.dump(self.model_dump(exclude_defaults=True), Dumper=dumper, sort_keys=False)
