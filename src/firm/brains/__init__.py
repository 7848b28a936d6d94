"""Brains: simulation (no key), llm (OpenAI-compatible), crewai (optional extra)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from firm.brains.base import Brain
from firm.errors import FirmError

BRAINS = ("simulation", "llm", "crewai")

# Brains defined by the layers above (firm.teams registers "team"): a run names its brain
# in the store, and `firm resume` rebuilds it by that name, so the name must be resolvable
# without this package importing upwards.
_REGISTERED: dict[str, Callable[[dict[str, Any]], Brain]] = {}


def register_brain(name: str, factory: Callable[[dict[str, Any]], Brain]) -> None:
    """Make `make_brain(name, options)` call `factory(options)`."""
    _REGISTERED[name] = factory


def make_brain(name: str, options: dict[str, Any] | None = None) -> Brain:
    options = dict(options or {})
    if name in _REGISTERED:
        return _REGISTERED[name](options)
    if name == "simulation":
        from firm.brains.simulation import SimulationBrain

        return SimulationBrain.from_options(options)
    if name == "llm":
        try:
            from firm.brains.llm import LLMBrain  # type: ignore[import-not-found]
        except ImportError as exc:
            raise FirmError(f"the llm brain is not available: {exc}") from None
        return LLMBrain.from_options(options)  # type: ignore[no-any-return]
    if name == "crewai":
        try:
            from firm.brains.crewai import CrewAIBrain  # type: ignore[import-not-found]
        except ImportError as exc:
            raise FirmError(
                f"the crewai brain needs the extra: pip install 'firm[crewai]' ({exc})"
            ) from None
        return CrewAIBrain.from_options(options)  # type: ignore[no-any-return]
    known = ", ".join([*BRAINS, *_REGISTERED])
    raise FirmError(f"unknown brain {name!r} (one of: {known})")


__all__ = ["BRAINS", "Brain", "make_brain", "register_brain"]
