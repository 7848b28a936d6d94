"""What firm needs to reach one MCP server, with `${VAR}` taken from firm's environment.

The chart keeps the placeholders (the stored chart never holds a secret); they are filled
in when the server is started.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from firm.errors import FirmError
from firm.org import McpServerSpec

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(text: str, where: str, environ: Mapping[str, str] | None = None) -> str:
    """Replace every `${VAR}` with its value; a variable that is not set is an error."""
    env = os.environ if environ is None else environ

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise FirmError(f"{where}: ${{{name}}} is not set in firm's environment")
        return env[name]

    return _VAR.sub(value, text)


@dataclass(frozen=True)
class ServerConfig:
    """One server, ready to connect to: placeholders filled in."""

    name: str
    command: tuple[str, ...] | None
    env: tuple[tuple[str, str], ...]
    cwd: str | None
    url: str | None
    headers: tuple[tuple[str, str], ...]
    timeout: float

    @classmethod
    def from_spec(
        cls,
        name: str,
        spec: McpServerSpec,
        environ: Mapping[str, str] | None = None,
        base_dir: Path | None = None,
    ) -> ServerConfig:
        where = f"mcp_servers.{name}"
        command = None
        if spec.command is not None:
            command = (
                expand(spec.command, f"{where}.command", environ),
                *(expand(a, f"{where}.args", environ) for a in spec.args),
            )
        env = tuple(
            (k, expand(v, f"{where}.env.{k}", environ)) for k, v in sorted(spec.env.items())
        )
        headers = tuple(
            (k, expand(v, f"{where}.headers.{k}", environ)) for k, v in sorted(spec.headers.items())
        )
        url = expand(spec.url, f"{where}.url", environ) if spec.url is not None else None
        return cls(
            name=name,
            command=command,
            env=env,
            cwd=_cwd(spec, base_dir),
            url=url,
            headers=headers,
            timeout=spec.timeout,
        )

    def launch_argv(self) -> list[str]:
        """The stdio server's command line, through the wrapper that ties it to this process."""
        assert self.command is not None
        # Run as a file in isolated mode: the wrapper needs only the standard library, and
        # importing firm first would add its start-up time to every server start.
        return [sys.executable, "-I", str(Path(__file__).with_name("child.py")), *self.command]

    def describe(self) -> str:
        """How the server is reached, for messages (never the headers: they hold secrets)."""
        if self.url is not None:
            return self.url
        assert self.command is not None
        return " ".join(self.command)


def _cwd(spec: McpServerSpec, base_dir: Path | None) -> str | None:
    if spec.command is None:
        return None
    if spec.cwd is not None:
        cwd = Path(spec.cwd)
        return str(cwd if cwd.is_absolute() or base_dir is None else base_dir / cwd)
    return str(base_dir) if base_dir is not None else None
