"""Grants: the authority a task runs under, and how it narrows down the chain. Pure, no I/O.

A grant has four parts, and each part only ever narrows on the way down:

- ``scopes``: tool names or globs the task may use or hand down (``crm.query``, ``files.*``);
- ``limits``: numeric ceilings by name (``max_rows: 100``); a ceiling absent means none;
- ``expires_at``: an absolute time (Unix seconds) after which nothing may be called; None = never;
- ``budget_tokens``: model tokens the task and its subtree may spend; None = unlimited.

Stored in a task's ``grant`` column and in its ``created``/``delegated`` event as JSON::

    {"scopes": ["crm.query", "files.*"], "limits": {"max_rows": 100.0},
     "expires_at": 1767225600.0, "budget_tokens": 20000}

A grant is what a task *holds*: it may hand all of it down. What it may *call* is its grant met
with its agent's own ``tools`` (see `callable_scopes`), so a manager with ``can_grant`` can
empower a report with a tool it cannot call itself.

Budget carving (the rule `derive_grant` applies): a subtask's budget is reserved out of what
its delegator has left when it is created, so siblings cannot each spend the whole. It is the
smaller of the assignee's own ``budget_tokens`` and what a narrowing asks for (when either
names an amount), else an equal share — the delegator's budget divided by its number of direct
reports plus one, the share the delegator keeps for its own work — and never more than the
delegator has left. A reservation is not returned when the subtask
ends early; a task's remaining budget is its budget minus its own usage minus every budget it
reserved for its subtasks (`remaining_budget`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from firm.authority import scopes as sc
from firm.org import TOOL_PATTERN, OrgChart

LIMIT_NAME_MAX = 64

# Bounds on a narrowing's tool patterns (`delegate_task`'s `tools`, `firm run --grant`). The
# scope algebra is exact, and exact questions about many starred globs grow quickly: these keep
# every question a model can ask to milliseconds (see benchmarks/grant_algebra.py).
REQUEST_SCOPES_MAX = 16
SCOPE_LENGTH_MAX = 128
SCOPE_STARS_MAX = 3


class GrantError(ValueError):
    """A grant or a grant request is malformed; the message says what and where."""


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise GrantError(f"{what} must be a number, not {value!r}")
    if value < 0:
        raise GrantError(f"{what} must not be negative, not {value!r}")
    return value


def _check_scopes(patterns: Iterable[Any], what: str) -> tuple[str, ...]:
    if isinstance(patterns, str):
        raise GrantError(f"{what} must be a list of tool names or globs, not a string")
    out = []
    for p in patterns:
        if not isinstance(p, str) or not TOOL_PATTERN.match(p):
            raise GrantError(
                f"{what}: {p!r} is not a tool name or glob "
                "(dotted names like 'files.read' or 'crm.*')"
            )
        out.append(p)
    return tuple(out)


def _check_request_scopes(patterns: Iterable[Any], what: str) -> tuple[str, ...]:
    """`_check_scopes`, plus the bounds a narrowing from a model or a client must keep."""
    if not isinstance(patterns, str) and isinstance(patterns, Iterable):
        patterns = list(itertools.islice(patterns, REQUEST_SCOPES_MAX + 1))
        if len(patterns) > REQUEST_SCOPES_MAX:
            raise GrantError(
                f"{what}: at most {REQUEST_SCOPES_MAX} patterns may be asked for; "
                "name fewer, or use a glob such as 'crm.*'"
            )
    for p in patterns:
        if isinstance(p, str) and len(p) > SCOPE_LENGTH_MAX:
            raise GrantError(
                f"{what}: a pattern may be at most {SCOPE_LENGTH_MAX} characters, "
                f"not {len(p)} ({p[:40]!r}…)"
            )
        if isinstance(p, str) and p.count("*") > SCOPE_STARS_MAX:
            raise GrantError(
                f"{what}: {p!r} has {p.count('*')} '*'; a pattern may have at most "
                f"{SCOPE_STARS_MAX}"
            )
    return _check_scopes(patterns, what)


def _check_limits(limits: Mapping[str, Any] | None, what: str) -> dict[str, float]:
    if limits is None:
        return {}
    if type(limits) is not dict and not isinstance(limits, Mapping):
        raise GrantError(f"{what} must be a mapping of ceiling names to numbers")
    out = {}
    for name, value in limits.items():
        if not isinstance(name, str) or not name or len(name) > LIMIT_NAME_MAX:
            raise GrantError(f"{what}: {name!r} is not a ceiling name")
        out[name] = _number(value, f"{what}.{name}")
    return out


def _min(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


@dataclass(frozen=True)
class Grant:
    """The authority a task runs under. Build with `Grant.of` (normalises the scopes)."""

    scopes: tuple[str, ...] = ()
    limits: Mapping[str, float] = field(default_factory=dict)
    expires_at: float | None = None
    budget_tokens: int | None = None

    @classmethod
    def of(
        cls,
        scopes: Iterable[str],
        limits: Mapping[str, float] | None = None,
        expires_at: float | None = None,
        budget_tokens: int | None = None,
    ) -> Grant:
        return cls(
            scopes=sc.minimal(sc.render(sc.parse(p)) for p in scopes),
            limits=dict(sorted((limits or {}).items())),
            expires_at=expires_at,
            budget_tokens=budget_tokens,
        )

    @classmethod
    def top(cls) -> Grant:
        """The grant that narrows nothing: the identity of `meet`."""
        return cls(scopes=("*",))

    # --- JSON ----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "scopes": list(self.scopes),
            "limits": dict(self.limits),
            "expires_at": self.expires_at,
            "budget_tokens": self.budget_tokens,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Grant:
        # A stored grant is a dict: the exact type test spares the Mapping ABC's slower one.
        if type(data) is not dict and not isinstance(data, Mapping):
            raise GrantError(f"a grant must be a JSON object, not {type(data).__name__}")
        unknown = set(data) - {"scopes", "limits", "expires_at", "budget_tokens"}
        if unknown:
            raise GrantError(f"a grant has unknown field(s): {', '.join(sorted(unknown))}")
        scopes = data.get("scopes", [])
        if not isinstance(scopes, list | tuple):
            raise GrantError("grant.scopes must be a list")
        for p in scopes:
            if not isinstance(p, str) or not p:
                raise GrantError(f"grant.scopes: {p!r} is not a glob")
        expires = data.get("expires_at")
        budget = data.get("budget_tokens")
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, int) or budget < 0
        ):
            raise GrantError(f"grant.budget_tokens must be a whole number ≥ 0, not {budget!r}")
        return cls(
            scopes=tuple(scopes),
            limits=_check_limits(data.get("limits"), "grant.limits"),
            expires_at=None if expires is None else _number(expires, "grant.expires_at"),
            budget_tokens=budget,
        )

    # --- questions -----------------------------------------------------------------------

    def allows(self, tool_name: str) -> bool:
        return sc.allows(self.scopes, tool_name)

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now > self.expires_at

    def describe(self) -> str:
        parts = [f"tools {', '.join(self.scopes) or 'none'}"]
        if self.limits:
            parts.append("limits " + ", ".join(f"{k}={_num(v)}" for k, v in self.limits.items()))
        if self.expires_at is not None:
            parts.append(f"expires at {self.expires_at:.0f}")
        if self.budget_tokens is not None:
            parts.append(f"budget {self.budget_tokens} tokens")
        return "; ".join(parts)


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


@dataclass(frozen=True)
class GrantRequest:
    """A narrowing: what a submitter (``firm run --grant/--limit/--ttl``) or a delegator
    (``delegate_task``'s tools/limits/ttl) asks for. None in a field narrows nothing."""

    tools: tuple[str, ...] | None = None
    limits: Mapping[str, float] = field(default_factory=dict)
    ttl: float | None = None
    budget_tokens: int | None = None

    @classmethod
    def parse(cls, value: GrantRequest | Mapping[str, Any] | None) -> GrantRequest:
        """Accept None, a GrantRequest, or a dict with keys tools/limits/ttl/budget_tokens."""
        if value is None:
            return cls()
        if isinstance(value, GrantRequest):
            return value
        if not isinstance(value, Mapping):
            raise GrantError("a grant request must be a mapping with tools, limits, ttl")
        unknown = set(value) - {"tools", "limits", "ttl", "budget_tokens"}
        if unknown:
            raise GrantError(
                f"unknown grant request field(s): {', '.join(sorted(unknown))} "
                "(known: tools, limits, ttl, budget_tokens)"
            )
        return cls.build(
            tools=value.get("tools"),
            limits=value.get("limits"),
            ttl=value.get("ttl"),
            budget_tokens=value.get("budget_tokens"),
        )

    @classmethod
    def build(
        cls,
        *,
        tools: Iterable[str] | None = None,
        limits: Mapping[str, Any] | None = None,
        ttl: float | None = None,
        budget_tokens: int | None = None,
    ) -> GrantRequest:
        if ttl is not None:
            ttl = _number(ttl, "ttl")
            if ttl <= 0:
                raise GrantError(f"ttl must be more than 0 seconds, not {ttl!r}")
        if budget_tokens is not None and (
            isinstance(budget_tokens, bool)
            or not isinstance(budget_tokens, int)
            or budget_tokens < 0
        ):
            raise GrantError(f"budget_tokens must be a whole number ≥ 0, not {budget_tokens!r}")
        return cls(
            tools=None if tools is None else _check_request_scopes(tools, "tools"),
            limits=_check_limits(limits, "limits"),
            ttl=ttl,
            budget_tokens=budget_tokens,
        )

    def as_grant(self, now: float) -> Grant:
        return Grant.of(
            ("*",) if self.tools is None else self.tools,
            self.limits,
            None if self.ttl is None else now + self.ttl,
            self.budget_tokens,
        )


# --- the lattice -----------------------------------------------------------------------------


def meet(a: Grant, b: Grant) -> Grant:
    """The widest grant within both: scopes intersected (glob-aware), every ceiling either side
    sets kept at the smaller value, the earlier expiry, the smaller budget."""
    limits = dict(a.limits)
    for k, v in b.limits.items():
        limits[k] = min(limits[k], v) if k in limits else v
    budget = _min(a.budget_tokens, b.budget_tokens)
    try:
        scopes = sc.intersect(a.scopes, b.scopes)
    except sc.ScopeTooComplex as exc:
        raise GrantError(f"{exc}: ask for fewer or plainer tool patterns") from None
    return Grant.of(
        scopes,
        limits,
        _min(a.expires_at, b.expires_at),
        None if budget is None else int(budget),
    )


def why_not_within(child: Grant, parent: Grant) -> list[str]:
    """Every way `child` is wider than `parent`, as sentences; empty when it is within."""
    problems = []
    for p in child.scopes:
        try:
            witness = sc.counterexample(parent.scopes, p)
        except sc.ScopeTooComplex:
            problems.append(f"scope {p!r} is too complex to check against the delegator's")
            continue
        if witness is not None:
            problems.append(f"scope {p!r} allows {witness!r}, which the delegator does not hold")
    for k, v in parent.limits.items():
        if k not in child.limits:
            problems.append(f"ceiling {k} ({_num(v)}) is dropped")
        elif child.limits[k] > v:
            problems.append(f"ceiling {k} is {_num(child.limits[k])}, above {_num(v)}")
    if parent.expires_at is not None and (
        child.expires_at is None or child.expires_at > parent.expires_at
    ):
        problems.append(f"expires at {child.expires_at}, after the delegator's {parent.expires_at}")
    if parent.budget_tokens is not None and (
        child.budget_tokens is None or child.budget_tokens > parent.budget_tokens
    ):
        problems.append(
            f"budget {child.budget_tokens} tokens, above the delegator's {parent.budget_tokens}"
        )
    return problems


def is_within(child: Grant, parent: Grant) -> bool:
    """Whether `child` is no wider than `parent` in every dimension."""
    return not why_not_within(child, parent)


# --- grants from the org chart ---------------------------------------------------------------


def authority_of(org: OrgChart, agent_id: str, now: float) -> Grant:
    """What the org chart lets an agent hold: its tools ∪ can_grant, its ceilings, ttl, budget."""
    spec = org.agent(agent_id)
    return Grant.of(
        [*org.tools_of(agent_id), *spec.can_grant],
        spec.limits,
        None if spec.ttl is None else now + spec.ttl,
        spec.budget_tokens,
    )


def callable_scopes(grant: Grant, org: OrgChart, agent_id: str) -> tuple[str, ...]:
    """What a task may call itself: its grant met with its agent's own `tools`."""
    return sc.intersect(grant.scopes, org.tools_of(agent_id))


def may_call(grant: Grant, org: OrgChart, agent_id: str, tool_name: str) -> bool:
    return grant.allows(tool_name) and sc.allows(org.tools_of(agent_id), tool_name)


def root_grant(
    org: OrgChart,
    agent_id: str,
    request: GrantRequest | Mapping[str, Any] | None,
    now: float,
) -> Grant:
    """The root task's grant: the top agent's authority narrowed by what the submitter asks."""
    return meet(authority_of(org, agent_id, now), GrantRequest.parse(request).as_grant(now))


def derive_grant(
    parent: Grant,
    org: OrgChart,
    assignee: str,
    narrowing: GrantRequest | Mapping[str, Any] | None,
    now: float,
    parent_remaining_budget: int | None,
) -> Grant:
    """A subtask's grant: the meet of the delegator's grant, the assignee's own authority
    (tools ∪ can_grant, ceilings, ttl) and the narrowing, with its budget carved out of what
    the delegator has left (see the module docstring for the rule)."""
    request = GrantRequest.parse(narrowing)
    own = authority_of(org, assignee, now)
    derived = meet(meet(parent, own), request.as_grant(now))
    return Grant(
        scopes=derived.scopes,
        limits=derived.limits,
        expires_at=derived.expires_at,
        budget_tokens=carve_budget(parent, org, assignee, request, parent_remaining_budget),
    )


def carve_budget(
    parent: Grant,
    org: OrgChart,
    assignee: str,
    request: GrantRequest,
    parent_remaining_budget: int | None,
) -> int | None:
    asked = _min(org.agent(assignee).budget_tokens, request.budget_tokens)
    if parent.budget_tokens is None:
        return None if asked is None else int(asked)
    left = parent.budget_tokens
    if parent_remaining_budget is not None:
        left = min(left, parent_remaining_budget)
    left = max(0, left)
    if asked is None:
        boss = org.agent(assignee).reports_to
        reports = len(org.reports(boss)) if boss else 1
        asked = parent.budget_tokens // (reports + 1)
    return int(min(asked, left))


def remaining_budget(grant: Grant, tokens_used: int, reserved: Iterable[int | None]) -> int | None:
    """What a task may still spend: its budget less its own usage and its subtasks' shares."""
    if grant.budget_tokens is None:
        return None
    return grant.budget_tokens - tokens_used - sum(r or 0 for r in reserved)
