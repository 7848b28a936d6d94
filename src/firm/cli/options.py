"""The options every command that starts work shares (`run`, `submit`, `serve`), in one place,
so that a goal submitted any of these ways can be given exactly the same brain and authority.
The brains' own options come from their declarations (firm.brains): see with_brain_options."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer
from typer.core import TyperCommand

from firm.brains import brain_specs, options_for
from firm.brains.registry import all_options
from firm.errors import FirmError


def _brain_help() -> str:
    names = [
        s.name if s.installed else f"{s.name} (pip install 'firm[{s.extra}]')"
        for s in brain_specs()
    ]
    return "The brain: " + ", ".join(names) + ". Each brain's options are listed below."


BrainOption = Annotated[str, typer.Option(help=_brain_help())]
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


def with_brain_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command every declared brain's options, grouped per brain in --help.

    The command declares `brain_values: dict[str, Any]` and receives the options' values in
    it, by `param` name; `options_for(brain, brain_values)` turns them into a run's options.
    """
    hints = get_type_hints(fn, include_extras=True)
    params = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in inspect.signature(fn).parameters.values()
        if p.name != "brain_values"
    ]
    added = [p.name for p in params]
    for option, brains in all_options():
        if option.param in added:
            raise FirmError(f"brain option {option.flag} clashes with an option of {fn.__name__}")
        panel = f"Options of the {' and '.join(brains)} brain{'s' if len(brains) > 1 else ''}"
        info = typer.Option(
            option.flag,
            help=option.help,
            min=option.min,
            max=option.max,
            envvar=option.envvar,
            rich_help_panel=panel,
            show_default=option.default not in (None, 0, 0.0, False),
        )
        params.append(
            inspect.Parameter(
                option.param,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=option.default,
                annotation=Annotated[option.type, info],
            )
        )
    names = {o.param for o, _ in all_options()}

    @functools.wraps(fn)
    def command(**kwargs: Any) -> Any:
        values = {k: kwargs.pop(k) for k in list(kwargs) if k in names}
        return fn(**kwargs, brain_values=values)

    del command.__wrapped__  # typer reads the signature below, not the wrapped function's
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command


class BrainOptionsCommand(TyperCommand):
    """A command whose --help lists each brain's options in a section of their own."""

    # Any: typer's click types are the click package's up to typer 0.2x and typer's own
    # vendored copy after, so no one annotation names both (and click is not ours to import).
    def format_options(self, ctx: Any, formatter: Any) -> None:
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                panel = getattr(param, "rich_help_panel", None) or "Options"
                sections.setdefault(panel, []).append(record)
        for title, records in sections.items():
            with formatter.section(title):
                formatter.write_dl(records)


def brain_command(app: typer.Typer, fn: Callable[..., Any]) -> None:
    """Register a command that takes the brains' options (see with_brain_options)."""
    app.command(cls=BrainOptionsCommand)(with_brain_options(fn))


def submission_options(brain: str, brain_values: dict[str, Any] | None) -> dict[str, Any]:
    """The options stored with a run for its brain; options for another brain are an error."""
    return options_for(brain, brain_values or {})
