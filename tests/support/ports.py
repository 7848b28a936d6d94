"""A server process started on a free loopback port, for the tests that must name the port
before the server binds it."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable

from tests.support.cli import SUBPROCESS_GUARD


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(
    start: Callable[[int], subprocess.Popen[bytes]], what: str, attempts: int = 3
) -> tuple[subprocess.Popen[bytes], int]:
    """Start a server with `start(port)` on a free port and return it once it accepts
    connections. Another process may take the port between its choice and the server's bind;
    the server then exits, and it is started again on another port. A server that keeps
    exiting at start fails the test with what it printed."""
    said = ""
    for _ in range(attempts):
        port = free_port()
        proc = start(port)
        deadline = time.monotonic() + SUBPROCESS_GUARD
        while proc.poll() is None:
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait(30)
                raise AssertionError(f"{what} did not start listening on port {port}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                time.sleep(0.1)
                continue
            if owns_listener(proc.pid, port):
                return proc, port
            # Another process's socket answered: this server is still starting, or is about
            # to exit because it could not bind.
            time.sleep(0.1)
        said = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    raise AssertionError(f"{what} exited at start {attempts} times; last said:\n{said}")


def owns_listener(pid: int, port: int) -> bool:
    """Whether process `pid` holds the socket listening on loopback `port` (Linux's /proc):
    a connection that succeeds may have reached another process that took the port."""
    sockets = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                sockets.add(f"socket:[{fields[9]}]")
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in sockets:
                return True
        except OSError:
            continue
    return False
