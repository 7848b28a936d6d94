"""Brains: simulation (no key), llm (OpenAI-compatible), crewai (the crewai extra).

Each is declared once here with the options it takes (see registry.py); declaring imports
nothing heavy — a brain's module is imported when the brain is built.
"""

from __future__ import annotations

from typing import Any

from firm.brains.base import Brain
from firm.brains.registry import (
    BrainOption,
    BrainSpec,
    brain_spec,
    brain_specs,
    make_brain,
    options_for,
    register_brain,
)


def _simulation_options(
    sim_latency: float = 0.0,
    sim_linger: float = 0.0,
    sim_fail: list[str] | None = None,
    sim_fail_rate: float = 0.0,
    seed: int = 0,
) -> dict[str, Any]:
    stored = {
        "latency": sim_latency,
        "linger": sim_linger,
        "fail_agents": list(sim_fail or []),
        "fail_rate": sim_fail_rate,
        "seed": seed,
    }
    return {k: v for k, v in stored.items() if v}


SIMULATION = register_brain(
    BrainSpec(
        "simulation",
        "firm.brains.simulation:SimulationBrain.from_options",
        help="Scripted agents that delegate and deliver without a model (no key).",
        options=(
            BrainOption("sim_latency", "--sim-latency", float, 0.0, "Seconds per turn.", min=0),
            BrainOption(
                "sim_linger",
                "--sim-linger",
                float,
                0.0,
                "Seconds a session stays open after acting, before its turn ends.",
                min=0,
            ),
            BrainOption(
                "sim_fail",
                "--sim-fail",
                list[str] | None,
                None,
                "This agent fails its tasks (repeatable).",
                multiple=True,
            ),
            BrainOption(
                "sim_fail_rate", "--sim-fail-rate", float, 0.0, "Share of tasks that fail, 0 to 1."
            ),
            BrainOption("seed", "--seed", int, 0, "Seed for --sim-fail-rate."),
        ),
        collect=_simulation_options,
    )
)

# The model settings the llm brain takes; the crewai brain takes the same.
LLM_OPTIONS = (
    BrainOption(
        "model",
        "--model",
        str | None,
        None,
        "The model of every agent that names none of its own in the chart "
        "[default: the chart's company llm.model, else FIRM_MODEL].",
    ),
    BrainOption(
        "temperature", "--temperature", float | None, None, "Sampling temperature.", min=0, max=2
    ),
    BrainOption(
        "max_iterations",
        "--max-iterations",
        int | None,
        None,
        "Model calls per session at most.",
        min=1,
        max=1000,
    ),
)

LLM = register_brain(
    BrainSpec(
        "llm",
        "firm.brains.llm:LLMBrain.from_options",
        help="A tool-calling loop on any OpenAI-compatible server "
        "(OPENAI_BASE_URL, OPENAI_API_KEY).",
        options=LLM_OPTIONS,
        collect="firm.brains.llm:submission_options",
    )
)

CREWAI = register_brain(
    BrainSpec(
        "crewai",
        "firm.brains.crewai:CrewAIBrain.from_options",
        help="Each session a one-agent CrewAI crew on firm's checked tools.",
        options=LLM_OPTIONS,
        collect="firm.brains.llm:submission_options",
        extra="crewai",
        needs="crewai",
    )
)

__all__ = [
    "Brain",
    "BrainOption",
    "BrainSpec",
    "brain_spec",
    "brain_specs",
    "make_brain",
    "options_for",
    "register_brain",
]
