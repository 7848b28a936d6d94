"""Start an MCP server so that it dies with the firm process that started it.

`python -m firm.mcp.child COMMAND ARGS...` asks the kernel to kill this process when its
parent dies (Linux's PR_SET_PDEATHSIG), then replaces itself with COMMAND. A `firm run`
killed with SIGKILL gets no chance to stop its servers; the kernel does it instead.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PARENT_ENV = "FIRM_MCP_PARENT_PID"


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return  # elsewhere the server sees its stdin close when firm goes
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    # The parent may have died between our fork and the prctl: then nobody would kill us.
    expected = os.environ.pop(PARENT_ENV, "")
    if expected and str(os.getppid()) != expected:
        os._exit(1)


def main(argv: list[str]) -> None:
    if not argv:
        print("usage: python -m firm.mcp.child COMMAND [ARGS...]", file=sys.stderr)
        raise SystemExit(2)
    _die_with_parent()
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"cannot start {argv[0]!r}: {exc.strerror}", file=sys.stderr)
        raise SystemExit(127) from None


if __name__ == "__main__":
    main(sys.argv[1:])
