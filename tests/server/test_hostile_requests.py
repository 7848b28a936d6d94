"""Hostile requests get a 4xx saying what is wrong, quickly, and slow connections are closed
(issue 11, item 6): never a 500, never a connection held for ever."""

from __future__ import annotations

import json
import os
import socket
from urllib.parse import urlsplit

import pytest
from office_kit import Running

from firm.server import limits, timeouts


def post(office: Running, path: str, body: bytes) -> tuple[int, dict]:
    with office.client() as c:
        r = c.post(path, content=body, headers={"Content-Type": "application/json"})
    return r.status_code, r.json()


@pytest.mark.parametrize(
    "body",
    [b'{"goal": NaN}', b'{"goal": "Plan the launch", "priority": -Infinity}'],
)
def test_a_number_json_cannot_carry_is_a_4xx(office: Running, body: bytes) -> None:
    status, answer = post(office, "/api/tasks", body)
    assert 400 <= status < 500
    assert "not a number JSON can carry" in json.dumps(answer)


def test_a_cancel_with_an_infinite_reason_is_a_4xx(office: Running) -> None:
    task = office.submit("Plan the offsite")
    status, answer = post(office, f"/api/tasks/{task['id']}/cancel", b'{"reason": Infinity}')
    assert 400 <= status < 500 and "Infinity" in answer["detail"]


def test_a_body_over_the_size_cap_is_refused_unread(office: Running) -> None:
    many = "{" + ",".join(f'"k{i}": 1' for i in range(300_000)) + "}"
    status, answer = post(office, "/api/tasks", many.encode())
    assert status == 413 and "bytes" in answer["detail"]


def test_too_many_keys_or_too_deep_is_refused_before_validation(office: Running) -> None:
    many = "{" + ",".join(f'"k{i}": 1' for i in range(limits.MAX_ITEMS + 1)) + "}"
    status, answer = post(office, "/api/tasks", many.encode())
    assert status == 400 and "keys and items" in answer["detail"]
    deep = b'{"goal": ' + b"[" * 100 + b"]" * 100 + b"}"
    status, answer = post(office, "/api/tasks", deep)
    assert status == 400 and "nests deeper" in answer["detail"]


def test_a_symlink_loop_in_the_workspace_is_a_4xx(office: Running) -> None:
    os.symlink("loop", office.workspace / "loop")
    with office.client() as c:
        r = c.get("/api/files/loop")
    assert 400 <= r.status_code < 500 and "symlink loop" in r.json()["detail"]


def connect(office: Running) -> socket.socket:
    url = urlsplit(office.url)
    sock = socket.create_connection((url.hostname, url.port), timeout=20)
    return sock


def closed_by_server(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes; raises socket.timeout if it never does."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


@pytest.mark.parametrize("sent", [b"", b"GET /api/org HTTP/1.1\r\nHost: x\r\n"])
def test_a_connection_that_never_finishes_its_headers_is_closed(
    office: Running, monkeypatch: pytest.MonkeyPatch, sent: bytes
) -> None:
    monkeypatch.setattr(timeouts, "HEADER_TIMEOUT", 0.5)
    with connect(office) as sock:
        sock.sendall(sent)
        assert closed_by_server(sock) == b""


def test_a_body_that_never_finishes_gets_a_408(
    office: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "BODY_TIMEOUT", 0.5)
    with connect(office) as sock:
        sock.sendall(
            b"POST /api/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"goal":'
        )
        sock.settimeout(20)
        assert sock.recv(65536).startswith(b"HTTP/1.1 408")
