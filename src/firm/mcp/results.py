"""An MCP tool result as a model reads it.

Text stays text; structured content is JSON; images, audio and binary resources are saved
into the company workspace and the model gets their paths (a model reads a path, not a
megabyte of base64). A result the server marks as an error becomes a tool error.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import mimetypes
from typing import Any, Protocol

from firm.errors import ToolError

TEXT_LIMIT = 100_000  # characters of a result a model is shown; the rest is cut with a note


class Files(Protocol):
    """Where binary results go: the calling session's workspace."""

    def save_bytes(self, path: str, data: bytes) -> str: ...


def result_text(server: str, tool: str, result: Any, files: Files | None) -> str:
    parts: list[str] = []
    for block in result.content or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(_save(server, tool, block.data, field(block, "mimeType"), files))
        elif kind == "resource":
            res = block.resource
            if getattr(res, "text", None) is not None:
                parts.append(res.text)
            else:
                mime = field(res, "mimeType") or "application/octet-stream"
                parts.append(_save(server, tool, res.blob, mime, files))
        elif kind == "resource_link":
            parts.append(f"resource: {block.uri}")
    structured = field(result, "structuredContent")
    # Structured content is added unless a text block already carries the same JSON.
    if structured is not None and not any(_is_json_of(p, structured) for p in parts):
        parts.append(json.dumps(structured, ensure_ascii=False, sort_keys=True))
    text = "\n".join(parts) if parts else "(no content)"
    if len(text) > TEXT_LIMIT:
        text = text[:TEXT_LIMIT] + f"\n… (cut: the result had {len(text)} characters)"
    if field(result, "isError"):
        raise ToolError(f"{server}.{tool} failed: {text}")
    return text


def field(obj: Any, camel: str) -> Any:
    """A field of an SDK object by its protocol name (SDK 1.x) or its snake_case name (2.x)."""
    if hasattr(obj, camel):
        return getattr(obj, camel)
    snake = "".join("_" + c.lower() if c.isupper() else c for c in camel)
    return getattr(obj, snake, None)


def _is_json_of(text: str, value: Any) -> bool:
    try:
        return bool(json.loads(text) == value)
    except (ValueError, TypeError):
        return False


def _save(server: str, tool: str, data: str, mime: str, files: Files | None) -> str:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"({mime} content that is not valid base64, left out)"
    if files is None:
        return f"({mime} content of {len(raw)} bytes, not saved: no workspace)"
    ext = mimetypes.guess_extension(mime.split(";")[0].strip()) or ".bin"
    # Named by content: the same image returned twice is one file, never an overwrite.
    name = f"mcp/{server}/{tool}-{hashlib.sha256(raw).hexdigest()[:12]}{ext}"
    path = files.save_bytes(name, raw)
    return f"({mime}, {len(raw)} bytes) saved as {path}"
