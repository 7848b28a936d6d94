"""The options every command that starts work shares (`run`, `submit`, `serve`), in one place,
so that a goal submitted any of these ways can be given exactly the same brain and authority."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from firm.errors import FirmError

BrainOption = Annotated[str, typer.Option(help="simulation (no key) or llm.")]
WorkspaceOption = Annotated[
    Path | None,
    typer.Option(
        help="Where agents write files [default: the org chart's workspace, else ./workspace]."
    ),
]
MaxConcurrentOption = Annotated[
    int | None,
    typer.Option(
        min=1, max=1024, help="Sessions at once [default: the org chart's max_concurrent]."
    ),
]
ToOption = Annotated[
    str | None, typer.Option(help="The agent the goal goes to [default: the top of the chart].")
]
PriorityOption = Annotated[str, typer.Option(help="low, normal, high or urgent.")]
LanguageOption = Annotated[
    str | None,
    typer.Option(help="Language code for the work [default: detected from the goal]."),
]
SimLatencyOption = Annotated[float, typer.Option(help="Simulation: seconds per turn.")]
SimLingerOption = Annotated[
    float,
    typer.Option(
        help="Simulation: seconds a session stays open after acting, before its turn ends."
    ),
]
SimFailOption = Annotated[
    list[str] | None, typer.Option(help="Simulation: this agent fails its tasks (repeatable).")
]
SimFailRateOption = Annotated[
    float, typer.Option(help="Simulation: share of tasks that fail, 0 to 1.")
]
SeedOption = Annotated[int, typer.Option(help="Simulation: seed for --sim-fail-rate.")]
ModelOption = Annotated[
    str | None,
    typer.Option(
        help="LLM: the model of every agent that names none of its own in the chart "
        "[default: the chart's company llm.model, else FIRM_MODEL]."
    ),
]
TemperatureOption = Annotated[
    float | None, typer.Option(min=0, max=2, help="LLM: sampling temperature.")
]
MaxIterationsOption = Annotated[
    int | None, typer.Option(min=1, max=1000, help="LLM: model calls per session at most.")
]


def sim_options(
    latency: float, fail: list[str] | None, fail_rate: float, seed: int, linger: float = 0.0
) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if latency:
        options["latency"] = latency
    if linger:
        options["linger"] = linger
    if fail:
        options["fail_agents"] = list(fail)
    if fail_rate:
        options["fail_rate"] = fail_rate
    if seed:
        options["seed"] = seed
    return options


def brain_options(
    brain: str,
    *,
    sim_latency: float = 0.0,
    sim_linger: float = 0.0,
    sim_fail: list[str] | None = None,
    sim_fail_rate: float = 0.0,
    seed: int = 0,
    model: str | None = None,
    temperature: float | None = None,
    max_iterations: int | None = None,
) -> dict[str, Any]:
    """The options stored with a run for its brain; options for another brain are an error."""
    llm_asked = model is not None or temperature is not None or max_iterations is not None
    sim_asked = bool(sim_latency or sim_linger or sim_fail or sim_fail_rate or seed)
    if brain in ("llm", "crewai"):  # crewai reads the same model settings as llm
        if sim_asked:
            raise FirmError(
                "--sim-latency, --sim-linger, --sim-fail, --sim-fail-rate and --seed apply to "
                "--brain simulation"
            )
        from firm.brains.llm import submission_options

        return submission_options(
            model=model, temperature=temperature, max_iterations=max_iterations
        )
    if llm_asked:
        raise FirmError(
            "--model, --temperature and --max-iterations apply to --brain llm and crewai"
        )
    if brain == "simulation":
        return sim_options(sim_latency, sim_fail, sim_fail_rate, seed, sim_linger)
    return {}
