"""The brains firm knows, each declared once: its name, how to build it, the options it takes.

One declaration serves every way work starts: `firm run`, `firm submit` and `firm serve` make
their brain flags from it (grouped per brain in `--help`), `firm worker`, `firm resume` and the
Python API build brains by name from it. A brain defined above this package (the team brain)
registers with `register_brain`; another package declares its brains under the "firm.brains"
entry-point group. A brain's factory is a "module:attribute"
string or a callable, imported only when the brain is built, so declaring a brain costs nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from firm.brains.base import Brain
from firm.errors import FirmError

log = logging.getLogger("firm.brains")


@dataclass(frozen=True)
class BrainOption:
    """One option a brain takes on the command line.

    `param` is the keyword the brain's `collect` receives (and the CLI's parameter name),
    `flag` the command-line flag. A value equal to `default` counts as not given.
    """

    param: str
    flag: str
    type: Any
    default: Any
    help: str
    min: float | None = None
    max: float | None = None
    envvar: str | None = None
    multiple: bool = False  # repeatable: the value is a list


Factory = Callable[[dict[str, Any]], Brain]


@dataclass(frozen=True)
class BrainSpec:
    """A brain's declaration.

    `factory(options)` builds the brain from the options stored with a run. `collect(**given)`
    turns the command-line options that were given into those stored options; without it the
    given options are stored under their `param` names. `extra` names the pip extra the brain
    needs (`needs` is a module whose absence means the extra is not installed).
    """

    name: str
    factory: Factory | str
    help: str
    options: tuple[BrainOption, ...] = ()
    collect: Callable[..., dict[str, Any]] | str | None = None
    extra: str | None = None
    needs: str | None = None
    selectable: bool = True  # offered by --brain (the team brain is made by Team, not chosen)

    @property
    def installed(self) -> bool:
        return self.needs is None or importlib.util.find_spec(self.needs) is not None

    def missing_extra(self) -> FirmError:
        return FirmError(
            f"the {self.name} brain needs the {self.extra} extra: pip install 'firm[{self.extra}]'"
        )

    def build(self, options: Mapping[str, Any] | None = None) -> Brain:
        if not self.installed:
            raise self.missing_extra()
        try:
            factory = _resolve(self.factory)
        except ImportError as exc:
            if self.extra:
                raise FirmError(f"{self.missing_extra()} ({exc})") from None
            raise FirmError(f"the {self.name} brain is not available: {exc}") from None
        return factory(dict(options or {}))  # type: ignore[no-any-return]

    def stored_options(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The options to store with a run, from the command-line values of this brain's
        options (those left at their defaults are not given)."""
        mine = {o.param for o in self.options}
        values = {k: v for k, v in given.items() if k in mine}
        if self.collect is None:
            return {k: v for k, v in values.items() if v is not None and v != _default(self, k)}
        return dict(_resolve(self.collect)(**values))


def _default(spec: BrainSpec, param: str) -> Any:
    return next(o.default for o in spec.options if o.param == param)


def _resolve(target: Any) -> Any:
    """A callable, or "package.module:attr.attr" imported now."""
    if not isinstance(target, str):
        return target
    module_name, _, path = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


_BRAINS: dict[str, BrainSpec] = {}


def register_brain(spec: BrainSpec | str, factory: Factory | None = None) -> BrainSpec:
    """Declare a brain. `register_brain(name, factory)` declares one without options that
    `--brain` does not offer (a brain other code chooses, like the team brain)."""
    if isinstance(spec, str):
        if factory is None:
            raise TypeError("register_brain(name, factory): the factory is missing")
        spec = BrainSpec(spec, factory, help="", selectable=False)
    _BRAINS[spec.name] = spec
    return spec


_plugins_loaded = False


def _load_plugins() -> None:
    """Brains other packages declare under the "firm.brains" entry-point group (a BrainSpec
    each), so that `firm run --help`, `firm worker` and `firm resume` know them too."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for entry in entry_points(group="firm.brains"):
        try:
            spec = entry.load()
        except Exception as exc:  # a broken plugin must not take the built-in brains down
            log.warning("brain plugin %s cannot be loaded: %s", entry.value, exc)
            continue
        if isinstance(spec, BrainSpec) and spec.name not in _BRAINS:
            register_brain(spec)


def brain_spec(name: str) -> BrainSpec:
    _load_plugins()
    spec = _BRAINS.get(name)
    if spec is None:
        known = ", ".join(s.name for s in brain_specs())
        raise FirmError(f"unknown brain {name!r} (one of: {known})")
    return spec


def brain_specs(*, selectable_only: bool = True) -> list[BrainSpec]:
    """The declared brains, in declaration order."""
    _load_plugins()
    return [s for s in _BRAINS.values() if s.selectable or not selectable_only]


def make_brain(name: str, options: Mapping[str, Any] | None = None) -> Brain:
    """Build the named brain from a run's stored options."""
    return brain_spec(name).build(options)


def options_for(name: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The options to store for `--brain NAME` from every brain flag's command-line value.
    A flag of another brain that was given is an error naming the brains it applies to."""
    spec = brain_spec(name)
    mine = {o.param for o in spec.options}
    for other in brain_specs():
        stray = [
            o
            for o in other.options
            if o.param not in mine and given.get(o.param) not in (None, o.default, [], ())
        ]
        if stray:
            flags = [o.flag for o in other.options]
            owners = [s.name for s in brain_specs() if any(o in s.options for o in stray)]
            listed = ", ".join(flags[:-1]) + f" and {flags[-1]}" if len(flags) > 1 else flags[0]
            raise FirmError(f"{listed} apply to --brain {' and '.join(owners)}")
    return spec.stored_options(given)


def all_options() -> list[tuple[BrainOption, list[str]]]:
    """Every declared option once, with the brains that take it (for building a CLI)."""
    seen: dict[str, tuple[BrainOption, list[str]]] = {}
    for spec in brain_specs():
        for o in spec.options:
            if o.param in seen:
                seen[o.param][1].append(spec.name)
            else:
                seen[o.param] = (o, [spec.name])
    return list(seen.values())
