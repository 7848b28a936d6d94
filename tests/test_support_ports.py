"""The test kit's server start (tests/support/ports.py): a port another process took between
its choice and the server's bind is not mistaken for the server's."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests.support import ports

SERVER = (
    "import socket, sys, time\n"
    "s = socket.socket()\n"
    "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
    "s.listen()\n"
    "time.sleep(60)\n"
)


def test_a_port_taken_before_the_server_binds_it_is_given_up_for_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()  # answers connections, as the server would
        taken_port = taken.getsockname()[1]
        picks = iter([taken_port])
        choose = ports.free_port
        monkeypatch.setattr(ports, "free_port", lambda: next(picks, None) or choose())
        started: list[subprocess.Popen[bytes]] = []

        def start(port: int) -> subprocess.Popen[bytes]:
            proc = subprocess.Popen(
                [sys.executable, "-c", SERVER, str(port)], stderr=subprocess.PIPE
            )
            started.append(proc)
            return proc

        proc, port = ports.listening(start, "the toy server")
        try:
            assert port != taken_port
            assert len(started) == 2 and started[0].wait(30) != 0  # could not bind; exited
            assert ports.owns_listener(proc.pid, port)
        finally:
            proc.kill()
            proc.wait(30)
