"""Tool definitions: the @firm.tool decorator, argument schemas from type hints, lookup.

A tool's name is dotted (`crm.query`); the name a model sees has the dots turned to
underscores (`crm_query`). Arguments are validated by a pydantic model built from the
function's signature, so a model that calls a tool wrongly gets a precise message back.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import inspect
import json
import re
import sys
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from firm.errors import FirmError, ToolError
from firm.tools.schema import SchemaError, model_from_schema, property_types, validated
from firm.tools.workspace import Workspace

TOOL_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")


class ToolContext(ABC):
    """What a tool sees of the session calling it. Annotate a parameter with this type to
    receive it; the parameter is hidden from the model. The session implements it."""

    task_id: str
    agent_id: str
    workspace: Workspace

    @abstractmethod
    def delegate(
        self,
        assignee: str,
        title: str,
        description: str,
        *,
        priority: str | None = None,
        language: str | None = None,
        tools: list[str] | None = None,
        limits: dict[str, float] | None = None,
        ttl: float | None = None,
    ) -> str: ...

    @abstractmethod
    def complete(self, result: str, files: list[str] | None) -> str: ...

    @abstractmethod
    def fail(self, reason: str) -> str: ...

    @abstractmethod
    def ask_human(self, question: str) -> str: ...

    @abstractmethod
    def wrote_file(self, path: str) -> None: ...


# The JSON schema of each arguments model, as parameters_schema gives it (a model's schema
# never changes; one made at run time goes with its model).
_SCHEMAS: weakref.WeakKeyDictionary[type[BaseModel], dict[str, Any]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ToolDef:
    name: str
    fn: Callable[..., Any]
    description: str
    args_model: type[BaseModel]
    limits: dict[str, str] = field(default_factory=dict)  # argument -> ceiling name
    context_param: str | None = None
    is_async: bool = False
    lifecycle: bool = False  # delegate/complete/fail: part of being an agent, not a scope
    # A tool built from a JSON schema (schema_tool) shows the model that schema as given.
    schema: dict[str, Any] | None = None

    @property
    def model_name(self) -> str:
        return self.name.replace(".", "_")

    @classmethod
    def from_schema(
        cls,
        name: str,
        description: str,
        parameters: dict[str, Any],
        fn: Callable[..., Any],
        *,
        limits: dict[str, str] | None = None,
        takes_context: bool = False,
    ) -> ToolDef:
        """A tool described by a JSON schema; see schema_tool."""
        return schema_tool(
            name, description, parameters, fn, limits=limits, takes_context=takes_context
        )

    def argument_names(self) -> list[str]:
        if self.schema is not None:
            return list(self.schema.get("properties", {}))
        return list(self.args_model.model_fields)

    def parameters_schema(self) -> dict[str, Any]:
        if self.schema is not None:
            return copy.deepcopy(self.schema)
        # pydantic builds the JSON schema anew at each call (~0.3 ms for a small model),
        # and it is asked for at every session's first model call and every tool call.
        schema = _SCHEMAS.get(self.args_model)
        if schema is None:
            schema = self.args_model.model_json_schema()
            schema.pop("title", None)
            for prop in schema.get("properties", {}).values():
                prop.pop("title", None)
            schema.setdefault("properties", {})
            schema["additionalProperties"] = False
            _SCHEMAS[self.args_model] = schema
        return copy.deepcopy(schema)  # the caller's to change

    def validate(self, arguments: dict[str, Any] | str | None) -> dict[str, Any]:
        """Parse and check arguments; raise ToolError with a message a model can act on."""
        return self.parse(arguments)[0]

    def parse(
        self, arguments: dict[str, Any] | str | None
    ) -> tuple[dict[str, Any], frozenset[str]]:
        """Like validate, and also which arguments the caller passed (the rest are defaults):
        a limited argument left to its default must not slip past its ceiling."""
        if arguments is None or arguments == "":
            arguments = {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError as exc:
                raise ToolError(
                    f"{self.model_name}: arguments are not valid JSON ({exc.msg} at "
                    f"position {exc.pos}); send one JSON object"
                ) from None
        if not isinstance(arguments, dict):
            raise ToolError(
                f"{self.model_name}: arguments must be a JSON object, "
                f"not {type(arguments).__name__}"
            )
        try:
            if self.schema is not None:
                return validated(self.args_model, arguments)
            # The validator itself, without model_validate's wrapper: the same check, run
            # at every call.
            model = self.args_model.__pydantic_validator__.validate_python(arguments)
        except ValidationError as err:
            parts = []
            for e in err.errors():
                loc = ".".join(str(p) for p in e["loc"]) or "(arguments)"
                if e["type"] == "missing":
                    parts.append(f"missing required argument {loc!r}")
                elif e["type"] == "extra_forbidden":
                    parts.append(f"unexpected argument {loc!r}")
                else:
                    parts.append(f"argument {loc!r}: {e['msg']}")
            allowed = ", ".join(self.argument_names()) or "none"
            raise ToolError(
                f"{self.model_name}: " + "; ".join(parts) + f" (arguments: {allowed})"
            ) from None
        # The model forbids extra fields, so its __dict__ holds exactly its fields, in order.
        return dict(model.__dict__), frozenset(model.__pydantic_fields_set__)


def _args_model(name: str, fn: Callable[..., Any]) -> tuple[type[BaseModel], str | None]:
    sig = inspect.signature(fn)
    try:
        hints = get_type_hints(fn)
    except Exception as exc:  # an unresolvable annotation is the tool author's mistake
        raise FirmError(f"tool {name!r}: cannot read its type hints: {exc}") from None
    fields: dict[str, Any] = {}
    context_param = None
    for pname, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise FirmError(f"tool {name!r}: *args/**kwargs cannot be described to a model")
        hint = hints.get(pname, Any)
        if hint is ToolContext or (inspect.isclass(hint) and issubclass(hint, ToolContext)):
            context_param = pname
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (hint, default)
    model = create_model(  # type: ignore[call-overload]
        f"{name.replace('.', '_')}_args",
        __config__=ConfigDict(extra="forbid", allow_inf_nan=False),
        **fields,
    )
    return model, context_param


def make_tool(
    name: str,
    fn: Callable[..., Any],
    *,
    description: str | None = None,
    limits: dict[str, str] | None = None,
    lifecycle: bool = False,
) -> ToolDef:
    if not TOOL_NAME.match(name):
        raise FirmError(f"tool name {name!r} must be dotted lowercase words, like 'crm.query'")
    model, context_param = _args_model(name, fn)
    limits = dict(limits or {})
    for arg in limits:
        if arg not in model.model_fields:
            raise FirmError(f"tool {name!r}: limit on {arg!r}, which is not one of its arguments")
    doc = description or inspect.getdoc(fn) or f"The {name} tool."
    return ToolDef(
        name=name,
        fn=fn,
        description=doc,
        args_model=model,
        limits=limits,
        context_param=context_param,
        is_async=inspect.iscoroutinefunction(fn),
        lifecycle=lifecycle,
    )


_CONTEXT_KWARG = "__firm_tool_context__"


def schema_tool(
    name: str,
    description: str,
    parameters: dict[str, Any],
    fn: Callable[..., Any],
    *,
    limits: dict[str, str] | None = None,
    takes_context: bool = False,
) -> ToolDef:
    """A tool whose arguments are described by a JSON schema (an MCP server's tool, a CrewAI
    tool) rather than by a function's signature.

    ``fn(arguments)`` — or ``fn(arguments, context)`` with ``takes_context`` — receives the
    arguments the caller gave, validated against ``parameters``, as a dict of JSON values; it
    may be async. ``limits`` works as for ``@firm.tool``, on number or integer properties.
    A schema outside the subset firm can check (see firm.tools.schema) is refused here.
    """
    if not TOOL_NAME.match(name):
        raise FirmError(f"tool name {name!r} must be dotted lowercase words, like 'crm.query'")
    if not callable(fn):
        raise FirmError(f"tool {name!r}: its body must be callable")
    parameters = json.loads(json.dumps(parameters))  # a private, plain-JSON copy
    model = model_from_schema(name, parameters)
    props = parameters.get("properties", {})
    if _CONTEXT_KWARG in props:
        raise SchemaError(f"tool {name!r}: property name {_CONTEXT_KWARG!r} is reserved")
    limits = dict(limits or {})
    for arg in limits:
        if arg not in props:
            raise FirmError(f"tool {name!r}: limit on {arg!r}, which is not one of its arguments")
        kinds = property_types(parameters, arg) - {"null"}
        if not kinds or not kinds <= {"integer", "number"}:
            raise FirmError(f"tool {name!r}: limit on {arg!r}, which is not a number argument")
    parameters.setdefault("type", "object")
    parameters.setdefault("properties", {})
    parameters["additionalProperties"] = False  # extra arguments are refused: say so

    def call(**kwargs: Any) -> Any:
        context = kwargs.pop(_CONTEXT_KWARG, None)
        return fn(kwargs, context) if takes_context else fn(kwargs)

    return ToolDef(
        name=name,
        fn=call,
        description=description or f"The {name} tool.",
        args_model=model,
        limits=limits,
        context_param=_CONTEXT_KWARG if takes_context else None,
        is_async=inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__),
        schema=parameters,
    )


def tool(
    name: str, *, limits: dict[str, str] | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a function as a firm tool.

    ``limits`` maps an argument to the ceiling that bounds it: ``{"rows": "max_rows"}``
    means a call passes only if ``rows`` is at most the caller's ``max_rows`` ceiling.
    """

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__firm_tool__ = make_tool(  # type: ignore[attr-defined]
            name, fn, description=description, limits=limits
        )
        return fn

    return register


def tools_in_module(module: Any) -> list[ToolDef]:
    """The module's `@firm.tool` functions and its ToolDef values (e.g. from schema_tool)."""
    found = [
        obj if isinstance(obj, ToolDef) else getattr(obj, "__firm_tool__", None)
        for obj in vars(module).values()
    ]
    return list({id(t): t for t in found if isinstance(t, ToolDef)}.values())


def import_tool_module(spec: str, base_dir: Path | None) -> Any:
    """Import a tool module by dotted name, or by a path relative to the org chart's folder."""
    looks_like_path = spec.endswith(".py") or "/" in spec or "\\" in spec
    if looks_like_path:
        path = Path(spec)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.is_file():
            raise FirmError(f"tool module {spec!r}: no such file {path}")
        mod_name = "firm_user_tools_" + re.sub(r"\W", "_", str(path.resolve()))
        if mod_name in sys.modules:
            return sys.modules[mod_name]
        loader_spec = importlib.util.spec_from_file_location(mod_name, path)
        assert loader_spec is not None and loader_spec.loader is not None
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[mod_name] = module
        try:
            loader_spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[mod_name]
            raise FirmError(f"tool module {spec!r} failed to import: {exc}") from exc
        return module
    if base_dir is not None and str(base_dir) not in sys.path:
        sys.path.append(str(base_dir))
    try:
        return importlib.import_module(spec)
    except ImportError as exc:
        raise FirmError(f"tool module {spec!r} cannot be imported: {exc}") from None


class ToolRegistry:
    """The tools a company knows, by dotted name and by the name models see."""

    def __init__(self, tools: Iterable[ToolDef] = ()):
        self._by_name: dict[str, ToolDef] = {}
        self._by_model_name: dict[str, ToolDef] = {}
        # Bumped by every add: what a company worked out from the tools (the tools it
        # offers an agent) is stale once it moves.
        self.version = 0
        for t in tools:
            self.add(t)

    def add(self, t: ToolDef) -> None:
        if t.name in self._by_name and self._by_name[t.name].fn is not t.fn:
            raise FirmError(f"two tools are named {t.name!r}")
        if t.model_name in self._by_model_name and self._by_model_name[t.model_name].name != t.name:
            raise FirmError(
                f"tools {t.name!r} and {self._by_model_name[t.model_name].name!r} "
                f"both appear to models as {t.model_name!r}"
            )
        self._by_name[t.name] = t
        self._by_model_name[t.model_name] = t
        self.version += 1

    def find(self, name: str) -> ToolDef | None:
        return self._by_name.get(name) or self._by_model_name.get(name)

    def all(self) -> list[ToolDef]:
        return list(self._by_name.values())

    def names(self) -> list[str]:
        return sorted(self._by_name)
