"""The access token: required for every change, for everything off loopback, and for
whatever a foreign Host or a foreign page's WebSocket asks."""

from __future__ import annotations

import json

import pytest
from office_kit import TOKEN, Running
from websockets.exceptions import ConnectionClosed

from firm.server.access import AccessPolicy, is_loopback


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("office.localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.20", False),
        ("example.org", False),
    ],
)
def test_which_addresses_are_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    assert AccessPolicy.for_host(host).reads_need_token is not loopback


def test_a_generated_token_is_long_and_new_each_time() -> None:
    a, b = AccessPolicy.for_host("127.0.0.1"), AccessPolicy.for_host("127.0.0.1")
    assert len(a.token) >= 30 and a.token != b.token
    assert AccessPolicy.for_host("127.0.0.1", "chosen").token == "chosen"


def test_changes_need_the_token(office: Running) -> None:
    for token in (None, "wrong-token"):
        with office.client(token=token) as c:
            for r in (
                c.post("/api/tasks", json={"goal": "Sneak a goal in"}),
                c.post("/api/tasks/T-00000000/cancel"),
            ):
                assert r.status_code == 401, r.text
                assert r.headers["www-authenticate"] == "Bearer"
                assert "token" in r.json()["detail"]
    with office.client(token=None) as c:
        titles = [t["title"] for t in c.get("/api/tasks", params={"limit": 1000}).json()["tasks"]]
    assert "Sneak a goal in" not in titles
    with office.client() as c:
        assert c.post("/api/tasks", json={"goal": "An honest goal"}).status_code == 201


def test_on_loopback_reads_need_no_token(office: Running) -> None:
    with office.client(token=None) as c:
        for path in ("/api/tasks", "/api/org", "/api/events"):
            assert c.get(path).status_code == 200, path


def test_on_loopback_a_stale_token_still_reads_but_cannot_act(office: Running) -> None:
    # A tab kept open across a restart of `firm serve` holds the old token.
    with office.client(token="token-from-before-a-restart") as c:
        assert c.get("/api/tasks").status_code == 200
        assert c.get("/api/runs").status_code == 200
        r = c.post("/api/tasks", json={"goal": "Act with a stale token"})
        assert r.status_code == 401 and "wrong" in r.json()["detail"]
    with office.ws("token=token-from-before-a-restart") as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "snapshot"
    with office.client(token="stale", Host="evil.example") as c:
        assert c.get("/api/tasks").status_code in (401, 403)  # still no way around the Host rule


def test_a_foreign_host_name_cannot_read_without_the_token(office: Running) -> None:
    # DNS rebinding: a hostile name resolving to 127.0.0.1 arrives with its own Host header.
    with office.client(token=None, Host="evil.example") as c:
        r = c.get("/api/tasks")
        assert r.status_code == 403
        assert "evil.example" in r.json()["detail"]
    with office.client(Host="evil.example") as c:
        assert c.get("/api/tasks").status_code == 200


def test_off_loopback_every_read_needs_the_token(fresh_office) -> None:
    public: Running = fresh_office(reads_need_token=True)
    with public.client(token=None) as c:
        for path in ("/api/tasks", "/api/org", "/api/events", "/api/files/x.md", "/api/tasks/T-1"):
            r = c.get(path)
            assert r.status_code == 401, path
            assert "token" in r.json()["detail"]
        assert c.get("/").status_code == 200  # the page itself holds no data; it asks for one
    with public.client(token="wrong") as c:
        assert c.get("/api/org").status_code == 401
    with public.client() as c:
        assert c.get("/api/org").status_code == 200

    with public.ws() as ws, pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=10)
    assert closed.value.rcvd.code == 4401
    assert "token" in closed.value.rcvd.reason

    with public.ws(f"token={TOKEN}") as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "snapshot"
    # Browsers cannot set headers on a WebSocket: the token may ride as a subprotocol.
    with public.ws(subprotocols=["firm", f"token.{TOKEN}"]) as ws:
        assert ws.subprotocol == "firm"
        assert json.loads(ws.recv(timeout=10))["type"] == "snapshot"


def test_off_loopback_the_api_schema_needs_the_token_too(fresh_office) -> None:
    # The schema names the company and lists its agents: it is a read like any other.
    public: Running = fresh_office(reads_need_token=True)
    company = public.office.org.company
    for token in (None, "wrong"):
        with public.client(token=token) as c:
            r = c.get("/openapi.json")
            assert r.status_code == 401, r.text
            assert company not in r.text
    with public.client() as c:
        schema = c.get("/openapi.json").json()
    assert company in schema["info"]["title"]
    assert "/api/tasks" in schema["paths"]
    with public.client(token=None) as c:
        docs = c.get("/docs")  # the docs page asks for the token itself (see test_docs_page)
        assert docs.status_code == 200
        assert company not in docs.text and "gabriel" not in docs.text


def test_on_loopback_the_schema_is_a_read_like_the_others(office: Running) -> None:
    with office.client(token=None) as c:
        assert "Acme AI" in c.get("/openapi.json").json()["info"]["title"]
        assert "Acme AI" in c.get("/docs").text
    with office.client(token=None, Host="evil.example") as c:
        assert c.get("/openapi.json").status_code == 403


def test_a_page_from_another_origin_cannot_watch_without_the_token(office: Running) -> None:
    with office.ws(origin="http://evil.example") as ws, pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=10)
    assert closed.value.rcvd.code == 4401
    host = office.url.removeprefix("http://")
    with office.ws(origin=f"http://{host}") as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "snapshot"
    with office.ws(f"token={TOKEN}", origin="http://evil.example") as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "snapshot"
