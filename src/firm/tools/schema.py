"""Argument models from JSON schemas: tools that arrive as a schema (MCP servers, CrewAI tools)
are validated by a pydantic model built from it, like tools written as Python functions.

The common subset of JSON schema is translated: types (and lists of types), properties and
required, enum and const, anyOf, a one-element allOf, local $ref into $defs, items, and the
string, number and array bounds. Values are checked strictly (no "5" for an integer). Anything
else — `not`, `oneOf`, `if`, `patternProperties`, a remote `$ref`, a recursive schema — is refused
when the tool is built, with the tool's name and where in the schema, rather than validated
loosely: a tool whose arguments cannot be checked is not offered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WrapValidator, create_model

from firm.errors import FirmError

# Keywords that describe rather than constrain: JSON schema itself does not validate them.
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$schema",
        "$id",
        "$comment",
        "format",
        "readOnly",
        "writeOnly",
        "deprecated",
        "contentMediaType",
        "contentEncoding",
        "$defs",
        "definitions",
    }
)
_BY_TYPE = {
    "string": {"minLength", "maxLength", "pattern"},
    "integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "array": {"items", "minItems", "maxItems", "uniqueItems"},
    "object": {"properties", "required", "additionalProperties"},
    "boolean": set(),
    "null": set(),
}
_GENERAL = {"type", "enum", "const", "anyOf", "allOf", "$ref"}
_SCALARS = (str, int, float, bool, type(None))
MAX_DEPTH = 32


class SchemaError(FirmError):
    """A JSON schema that firm cannot check arguments against."""


def model_from_schema(name: str, schema: Mapping[str, Any]) -> type[BaseModel]:
    """The pydantic model that validates a tool's arguments against its JSON schema.

    The schema must describe an object (a tool takes named arguments). Raises SchemaError
    naming the tool and the place in the schema for anything outside the supported subset.
    """
    if not isinstance(schema, Mapping):
        raise SchemaError(f"tool {name!r}: its parameters schema must be a JSON object")
    builder = _Builder(name, schema)
    kind = schema.get("type", "object" if "properties" in schema or not schema else None)
    if kind != "object":
        raise SchemaError(
            f"tool {name!r}: its parameters schema must have type 'object' (got {kind!r})"
        )
    return builder.object_model(schema, "(parameters)", f"{name.replace('.', '_')}_args", 0)


class _Builder:
    def __init__(self, tool: str, root: Mapping[str, Any]):
        self.tool = tool
        self.root = root
        self.resolving: list[str] = []
        self.models = 0

    def refuse(self, where: str, why: str) -> SchemaError:
        return SchemaError(f"tool {self.tool!r}: schema at {where}: {why}")

    # --- one node ------------------------------------------------------------------------

    def annotation(self, node: Any, where: str, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise self.refuse(where, f"nested deeper than {MAX_DEPTH}")
        if node is True or node == {}:
            return Any  # the schema accepts any JSON value: so do we
        if node is False:
            raise self.refuse(where, "`false` accepts nothing")
        if not isinstance(node, Mapping):
            raise self.refuse(where, "a schema must be an object")
        unknown = sorted(k for k in node if k not in _ANNOTATIONS and k not in _GENERAL)
        allowed_here = set().union(*_BY_TYPE.values())
        bad = [k for k in unknown if k not in allowed_here]
        if bad:
            raise self.refuse(where, f"unsupported keyword {bad[0]!r}")
        if "$ref" in node:
            if set(node) - _ANNOTATIONS - {"$ref"}:
                raise self.refuse(where, "$ref beside other constraints is not supported")
            return self.ref(node["$ref"], where, depth)
        if "allOf" in node:
            parts = node["allOf"]
            if (
                not isinstance(parts, list)
                or len(parts) != 1
                or set(node) - _ANNOTATIONS - {"allOf"}
            ):
                raise self.refuse(where, "allOf is supported only with a single schema")
            return self.annotation(parts[0], f"{where}.allOf[0]", depth + 1)
        if "anyOf" in node:
            options = node["anyOf"]
            if not isinstance(options, list) or not options:
                raise self.refuse(where, "anyOf must be a non-empty list")
            if set(node) - _ANNOTATIONS - {"anyOf"}:
                raise self.refuse(where, "anyOf beside other constraints is not supported")
            members = tuple(
                self.annotation(o, f"{where}.anyOf[{i}]", depth + 1) for i, o in enumerate(options)
            )
            return Union[members] if len(members) > 1 else members[0]  # noqa: UP007
        if "const" in node:
            return self.literal([node["const"]], where)
        if "enum" in node:
            if not isinstance(node["enum"], list) or not node["enum"]:
                raise self.refuse(where, "enum must be a non-empty list")
            return self.literal(node["enum"], where)
        kind = node.get("type")
        if isinstance(kind, list):
            if not kind:
                raise self.refuse(where, "an empty list of types accepts nothing")
            members = tuple(self.typed(node, k, where, depth) for k in kind)
            return Union[members] if len(members) > 1 else members[0]  # noqa: UP007
        if kind is None:
            if set(node) - _ANNOTATIONS:
                raise self.refuse(where, "constraints without a type are not supported")
            return Any
        return self.typed(node, kind, where, depth)

    def literal(self, values: list[Any], where: str) -> Any:
        if not all(isinstance(v, _SCALARS) for v in values):
            raise self.refuse(where, "enum and const are supported for scalar values only")
        return Literal[tuple(values)]

    def typed(self, node: Mapping[str, Any], kind: Any, where: str, depth: int) -> Any:
        if kind not in _BY_TYPE:
            raise self.refuse(where, f"unknown type {kind!r}")
        other = [
            k
            for k in node
            if k not in _ANNOTATIONS
            and k != "type"
            and k not in _BY_TYPE[kind]
            # a list of types may carry the constraints of each
            and not (isinstance(node.get("type"), list) and k in _any_type_keys(node["type"]))
        ]
        if other:
            raise self.refuse(where, f"{other[0]!r} does not apply to type {kind!r}")
        if kind == "null":
            return None
        if kind == "boolean":
            return bool
        if kind == "string":
            return Annotated[
                str,
                Field(
                    min_length=node.get("minLength"),
                    max_length=node.get("maxLength"),
                    pattern=node.get("pattern"),
                ),
            ]
        if kind in ("integer", "number"):
            bounds = Field(
                ge=node.get("minimum"),
                le=node.get("maximum"),
                gt=node.get("exclusiveMinimum"),
                lt=node.get("exclusiveMaximum"),
                multiple_of=node.get("multipleOf"),
            )
            if kind == "integer":
                return Annotated[int, bounds]
            return Annotated[float, bounds, WrapValidator(_keep_int)]
        if kind == "array":
            items = node.get("items", True)
            if isinstance(items, list):
                raise self.refuse(where, "tuple-style items are not supported")
            item = self.annotation(items, f"{where}.items", depth + 1)
            checks: list[Any] = [
                Field(min_length=node.get("minItems"), max_length=node.get("maxItems"))
            ]
            if node.get("uniqueItems"):
                checks.append(AfterValidator(_unique))
            return Annotated[list[item], *checks]  # type: ignore[valid-type]
        return self.object_annotation(node, where, depth)

    def object_annotation(self, node: Mapping[str, Any], where: str, depth: int) -> Any:
        extra = node.get("additionalProperties", True)
        if "properties" not in node and "required" not in node and extra is not False:
            # A map: any keys, values as the additionalProperties schema says.
            value = Any if extra is True else self.annotation(extra, f"{where}.*", depth + 1)
            return dict[str, value]  # type: ignore[valid-type]
        self.models += 1
        return self.object_model(node, where, f"{self.tool.replace('.', '_')}_{self.models}", depth)

    def object_model(
        self, node: Mapping[str, Any], where: str, model_name: str, depth: int
    ) -> type[BaseModel]:
        other = [k for k in node if k not in _ANNOTATIONS | _BY_TYPE["object"] | {"type"}]
        if other:
            raise self.refuse(where, f"unsupported keyword {other[0]!r}")
        props = node.get("properties", {})
        required = node.get("required", [])
        extra = node.get("additionalProperties", False)
        if not isinstance(props, Mapping):
            raise self.refuse(where, "properties must be an object")
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise self.refuse(where, "required must be a list of names")
        missing = [r for r in required if r not in props]
        if missing:
            raise self.refuse(where, f"required {missing[0]!r} is not among its properties")
        if extra not in (True, False):
            raise self.refuse(where, "additionalProperties with a schema beside properties")
        # Arguments not in the schema are refused even where the schema leaves them open:
        # nothing the tool did not describe reaches it.
        # Fields get neutral names with the property as alias, so any property name works.
        fields: dict[str, Any] = {}
        for i, (key, sub) in enumerate(props.items()):
            if not isinstance(key, str) or not key:
                raise self.refuse(where, f"property name {key!r} is not supported")
            annotation = self.annotation(sub, f"{where}.properties.{key}", depth + 1)
            # Unset optional arguments stay unset (left out when the arguments are passed on).
            default = ... if key in required else None
            fields[f"p{i}"] = (annotation, Field(default, alias=key))
        return create_model(  # type: ignore[call-overload,no-any-return]
            model_name,
            __config__=ConfigDict(
                extra="forbid", strict=True, allow_inf_nan=False, populate_by_name=False
            ),
            **fields,
        )

    def ref(self, ref: Any, where: str, depth: int) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise self.refuse(where, f"only local references (#/$defs/...) are supported: {ref!r}")
        if ref in self.resolving:
            raise self.refuse(where, f"recursive reference {ref!r} is not supported")
        target: Any = self.root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or part not in target:
                raise self.refuse(where, f"reference {ref!r} points nowhere")
            target = target[part]
        self.resolving.append(ref)
        try:
            return self.annotation(target, ref, depth + 1)
        finally:
            self.resolving.pop()


def _any_type_keys(kinds: list[Any]) -> set[str]:
    return set().union(*(_BY_TYPE.get(k, set()) for k in kinds if isinstance(k, str)))


def _keep_int(value: Any, handler: Any) -> Any:
    """A number stays what was sent: 3 arrives as 3, 2.5 as 2.5 (both checked as numbers)."""
    checked = handler(value)
    return value if type(value) is int else checked


def _unique(items: list[Any]) -> list[Any]:
    seen: list[Any] = []
    for item in items:
        if item in seen:
            raise ValueError(f"items must be unique ({item!r} appears twice)")
        seen.append(item)
    return items


def validated(
    model: type[BaseModel], arguments: dict[str, Any]
) -> tuple[dict[str, Any], frozenset[str]]:
    """Validate arguments with a model from model_from_schema: the arguments as plain JSON
    values (only those given) and the names given. Raises pydantic's ValidationError."""
    instance = model.model_validate(arguments)
    values = instance.model_dump(by_alias=True, exclude_unset=True)
    aliases = {name: f.alias or name for name, f in model.model_fields.items()}
    return values, frozenset(aliases[n] for n in instance.model_fields_set)


def property_types(schema: Mapping[str, Any], name: str) -> set[str]:
    """The JSON types a top-level property may take (to check that a limit bounds a number)."""
    prop = schema.get("properties", {}).get(name)
    if not isinstance(prop, Mapping):
        return set()
    kind = prop.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    return set()
