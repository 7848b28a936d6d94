"""The llm brain: a real model drives each agent, over any OpenAI-compatible endpoint.

Which model an agent uses is settled in one place, `LLMBrain.settings_for`:

- `model`: the brain's option (`--model`, for the whole run), else the org chart's `llm.model`
  (the agent's own, else the company's), else the `FIRM_MODEL` captured when the run was
  submitted, else `FIRM_MODEL` now.
- `temperature`, `max_iterations`, `max_tokens`, `timeout`: the brain's option, else the org
  chart's, else firm's default.
- endpoint: the org chart's `llm.base_url`, else `OPENAI_BASE_URL`; the key is read from the
  variable named by `llm.api_key_env` (default `OPENAI_API_KEY`) and is never stored.

The brain's options are stored with the run, so `firm resume` continues with the same
settings; only the key comes from the environment again.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from firm.brains.llm_client import Endpoint, ModelClient, RetryPolicy
from firm.brains.llm_loop import LoopSettings, SessionLoop
from firm.errors import FirmError
from firm.org import LLMConfig, OrgChart

if TYPE_CHECKING:
    from firm.brains.protocol import Session

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_MAX_ITERATIONS = 20
DEFAULT_TIMEOUT = 300.0
NO_KEY = "firm-no-key"  # sent to a self-hosted server that needs none (Ollama, llama.cpp, …)

# Options that override the org chart's llm settings for every agent of the run.
CHART_FIELDS = tuple(
    f for f in LLMConfig.model_fields if f not in ("base_url", "api_key_env", "prices")
)


@dataclass(frozen=True)
class AgentSettings:
    """The resolved model settings of one agent."""

    loop: LoopSettings
    endpoint: Endpoint


@dataclass
class LLMBrain:
    name: str = "llm"
    model: str | None = None
    temperature: float | None = None
    max_iterations: int | None = None
    max_tokens: int | None = None
    timeout: float | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    default_model: str | None = None
    default_base_url: str | None = None
    stream: bool = True
    strict_tools: bool | None = None  # None: the chart's llm.strict_tools, else off
    max_tokens_param: str = "max_tokens"
    max_retries: int = 4
    backoff: float = 1.0
    backoff_max: float = 30.0

    def __post_init__(self) -> None:
        self._clients: dict[Endpoint, ModelClient] = {}
        self._lock = threading.Lock()

    # --- construction ----------------------------------------------------------------------

    @classmethod
    def option_names(cls) -> list[str]:
        return [f.name for f in fields(cls) if f.name != "name"]

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> LLMBrain:
        known = set(cls.option_names())
        unknown = set(options) - known
        if unknown:
            raise FirmError(
                f"unknown llm option(s): {', '.join(sorted(unknown))} "
                f"(known: {', '.join(sorted(known))})"
            )
        chart_part = {k: v for k, v in options.items() if k in LLMConfig.model_fields}
        try:
            LLMConfig(**chart_part)  # the same bounds as in an org chart
        except Exception as exc:
            raise FirmError(f"invalid llm option: {exc}") from None
        brain = cls(**options)
        if brain.max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise FirmError("max_tokens_param must be 'max_tokens' or 'max_completion_tokens'")
        if brain.max_retries < 0 or brain.backoff < 0 or brain.backoff_max < 0:
            raise FirmError("max_retries, backoff and backoff_max must not be negative")
        return brain

    def options(self) -> dict[str, Any]:
        """The options as stored with a run (no key: only the name of its variable)."""
        defaults = LLMBrain()
        return {
            f: getattr(self, f)
            for f in self.option_names()
            if getattr(self, f) != getattr(defaults, f)
        }

    # --- settings ----------------------------------------------------------------------------

    def settings_for(self, org: OrgChart, agent_id: str) -> AgentSettings:
        """What agent_id runs on; raises FirmError saying what to set when it cannot run."""
        # The most specific setting wins: the agent's own entry in the chart, then the run's
        # options (--model, --temperature, ...), then the company's llm block, then defaults.
        own = org.agent(agent_id).llm or LLMConfig()
        company = org.llm or LLMConfig()
        model = (
            own.model
            or self.model
            or company.model
            or self.default_model
            or os.environ.get("FIRM_MODEL")
            or ""
        ).strip()
        if not model:
            raise FirmError(
                f"no model configured for {agent_id}: pass --model, set llm.model in the "
                "org chart, or set FIRM_MODEL"
            )

        def pick(name: str, default: Any) -> Any:
            for value in (getattr(own, name), getattr(self, name), getattr(company, name)):
                if value is not None:
                    return value
            return default

        base_url = (
            own.base_url
            or self.base_url
            or company.base_url
            or self.default_base_url
            or os.environ.get("OPENAI_BASE_URL")
            or None
        )
        key_env = own.api_key_env or self.api_key_env or company.api_key_env or DEFAULT_KEY_ENV
        key = os.environ.get(key_env, "").strip()
        if not key:
            if base_url is None or key_env != DEFAULT_KEY_ENV:
                where = "the OpenAI API" if base_url is None else base_url
                raise FirmError(
                    f"{key_env} is not set ({agent_id} calls {where}): export {key_env}, "
                    "or point OPENAI_BASE_URL at a server that needs no key"
                )
            key = NO_KEY
        bad = next((i for i, c in enumerate(key) if not (c.isascii() and c.isprintable())), None)
        if bad is not None:
            # An HTTP header carries ASCII only: a key pasted with a typographic character
            # would otherwise fail at the first model call, deep inside the HTTP client.
            raise FirmError(
                f"{key_env} holds {key[bad]!r} at character {bad + 1}, which no API key "
                "contains: copy the key again"
            )
        endpoint = Endpoint(
            base_url=base_url,
            api_key=key,
            api_key_env=key_env,
            timeout=float(pick("timeout", DEFAULT_TIMEOUT)),
        )
        loop = LoopSettings(
            model=model,
            temperature=pick("temperature", None),
            max_iterations=int(pick("max_iterations", DEFAULT_MAX_ITERATIONS)),
            max_tokens=pick("max_tokens", None),
            max_tokens_param=self.max_tokens_param,
            stream=self.stream,
            strict_tools=bool(pick("strict_tools", False)),
        )
        return AgentSettings(loop=loop, endpoint=endpoint)

    def check_company(self, org: OrgChart) -> None:
        """Fail before any work starts if some agent has no model or no key."""
        for agent in org.agents:
            self.settings_for(org, agent.id)

    def client_for(self, endpoint: Endpoint) -> ModelClient:
        """The brain's client for `endpoint`, made once and shared by every session (and by
        callers that speak their own protocol with the model, like a team's manager)."""
        with self._lock:
            client = self._clients.get(endpoint)
            if client is None:
                retry = RetryPolicy(self.max_retries, self.backoff, self.backoff_max)
                client = self._clients[endpoint] = ModelClient(endpoint, retry)
            return client

    # --- a session ---------------------------------------------------------------------------

    def run(self, session: Session, **loop_options: Any) -> str | None:
        """Work one session. `loop_options` go to SessionLoop (system, tools, response_format,
        check_answer), for callers that speak their own protocol with the model."""
        try:
            settings = self.settings_for(session.org, session.agent_id)
        except FirmError as exc:
            session.give_up(str(exc))
            return None
        client = self.client_for(settings.endpoint)
        loop = SessionLoop(session, settings.loop, client, **loop_options)
        return loop.run()


def submission_options(
    *,
    model: str | None = None,
    temperature: float | None = None,
    max_iterations: int | None = None,
) -> dict[str, Any]:
    """Brain options for a new run from the command line: what was asked, plus the model and
    endpoint the environment names now, so `firm resume` in another shell calls the same
    model (the key is read again; it is never stored)."""
    options: dict[str, Any] = {}
    if model:
        options["model"] = model
    if temperature is not None:
        options["temperature"] = temperature
    if max_iterations is not None:
        options["max_iterations"] = max_iterations
    if os.environ.get("FIRM_MODEL", "").strip():
        options["default_model"] = os.environ["FIRM_MODEL"].strip()
    if os.environ.get("OPENAI_BASE_URL", "").strip():
        options["default_base_url"] = os.environ["OPENAI_BASE_URL"].strip()
    return options
