"""A call's record before its body runs: the log entry a tool call writes ahead, proven
recordable, and the entry of a call refused before it could be checked."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic_core import PydanticSerializationError, to_jsonable_python

from firm.audit import recordable
from firm.chain import canonical_json, digest
from firm.errors import ToolError
from firm.tools.invoke import summary
from firm.tools.registry import ToolDef

MAX_TOOL_NAME = 200  # longer names are no tool's: refused, and cut short in the log


class Place(Protocol):
    """Where a check stands: the log's head it read and when it ran (a Standing is one)."""

    @property
    def checked_seq(self) -> int: ...
    @property
    def checked_at(self) -> float: ...


@dataclass(frozen=True)
class CallRecord:
    """A call's log entry as far as it is known before the body runs: proven recordable then,
    so nothing after the body can fail to log it for want of an encodable value."""

    data: dict[str, Any]

    @classmethod
    def prepare(
        cls, tool: ToolDef, args: dict[str, Any], given: frozenset[str], standing: Place
    ) -> CallRecord:
        try:
            # Validated values may be richer than JSON (a date, a path): hashed as JSON.
            plain = to_jsonable_python(args)
            data: dict[str, Any] = {
                "tool": tool.name,
                "args_digest": digest(plain),
                "summary": recordable.text(summary(tool, plain)),
                # What the audit verifier needs to re-decide the call: where the check stood
                # in the log, when it ran, and each limited argument with its ceiling.
                "checked_seq": standing.checked_seq,
                "checked_at": standing.checked_at,
            }
            if tool.limits:
                data["limited_args"] = {
                    a: plain.get(a) if a in given else None for a in tool.limits
                }
                data["ceilings"] = dict(tool.limits)
            if not _plainly_recordable(tool, standing):
                canonical_json(data).encode("utf-8")
        except (TypeError, ValueError, UnicodeError, PydanticSerializationError) as exc:
            raise ToolError(
                f"{tool.model_name}: the arguments cannot be recorded in the audit log "
                f"({recordable.text(str(exc), 200)}); send plain JSON values"
            ) from None
        return cls(data)

    def at_seq(self, seq: int) -> CallRecord:
        """The same record checked at another head: an int for an int, so as recordable."""
        return CallRecord({**self.data, "checked_seq": seq})


def _plainly_recordable(tool: ToolDef, standing: Place) -> bool:
    """Whether a call's entry is recordable by the types of what it holds, without encoding it
    once more: its digest and summary are text made so, and its limited arguments are parts
    of the arguments the digest has just encoded. What is left are the tool's name, the
    check's place and time (a clock may give NaN) and the tool's ceilings; anything unusual
    there is proven the long way, by encoding the whole entry."""
    at = standing.checked_at
    return (
        not tool.limits
        and type(tool.name) is str
        and tool.name.isascii()
        and type(standing.checked_seq) is int
        and type(at) is float
        and math.isfinite(at)
    )


def refusal(name: str, message: str) -> dict[str, Any]:
    return {
        "tool": recordable.text(name)[:MAX_TOOL_NAME],
        "error": recordable.text(message, 2000),
    }
