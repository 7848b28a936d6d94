"""WS /api/ws: a snapshot, then every event in order; a reconnect misses nothing."""

from __future__ import annotations

import json
from typing import Any

from office_kit import Running
from websockets.sync.client import ClientConnection


def receive(ws: ClientConnection) -> dict[str, Any]:
    return json.loads(ws.recv(timeout=30))


def events_until(ws: ClientConnection, stop) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """Read event batches until stop(event) holds for one of them; return all read."""
    seen: list[dict[str, Any]] = []
    while True:
        message = receive(ws)
        assert message["type"] == "events"
        assert message["events"], "an empty batch is never sent"
        seen += message["events"]
        if any(stop(e) for e in message["events"]):
            return seen


def log(office: Running, after: int, until: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with office.client() as c:
        while after < until:
            page = c.get("/api/events", params={"after": after, "limit": 1000}).json()
            out += [e for e in page["events"] if e["seq"] <= until]
            after = page["next_after"]
    return out


def finished(root: str):  # type: ignore[no-untyped-def]
    return lambda e: e["task_id"] == root and e["kind"] in ("completed", "failed", "cancelled")


def test_the_snapshot_shows_the_office_as_it_is(office: Running) -> None:
    earlier = office.submit("Prepare the board meeting")["id"]
    office.finish(earlier)
    with office.ws() as ws:
        snap = receive(ws)
    assert snap["type"] == "snapshot"
    assert snap["org"]["company"] == "Acme AI"
    assert [a["id"] for a in snap["org"]["agents"]][:3] == ["ceo", "cto", "cmo"]
    tasks = {t["id"]: t for t in snap["tasks"]}
    assert tasks[earlier]["status"] == "done"
    assert sum(t["root_id"] == earlier for t in tasks.values()) == 7
    with office.client() as c:
        assert snap["seq"] <= c.get("/api/events").json()["last_seq"]
    # Desks show each manager's latest thought.
    assert "Splitting" in snap["agents"]["ceo"]["thought"]


def test_every_event_arrives_live_and_in_order(office: Running) -> None:
    with office.ws() as ws:
        snap = receive(ws)
        root = office.submit("Ship the mobile app")["id"]
        seen = events_until(ws, finished(root))
    seqs = [e["seq"] for e in seen]
    assert seqs == list(range(snap["seq"] + 1, snap["seq"] + 1 + len(seqs)))
    assert seen == log(office, snap["seq"], seqs[-1])
    # (the checkpoint that signs the log when a root ends may arrive in the same batch)
    mine = [e for e in seen if e["task_id"] == root and e["kind"] != "checkpoint"]
    assert mine[0]["kind"] == "created" and mine[-1]["kind"] == "completed"
    assert sum(e["kind"] == "delegated" for e in seen) >= 6


def test_a_watcher_that_reconnects_with_its_last_seq_misses_nothing(office: Running) -> None:
    with office.ws() as ws:
        snap = receive(ws)
        first = office.submit("Run the spring campaign")["id"]
        before = events_until(ws, lambda e: e["kind"] == "delegated")
    last = before[-1]["seq"]
    # Away while the first goal finishes and a second one runs start to end.
    office.finish(first)
    second = office.submit("Open the London office")["id"]
    office.finish(second)

    with office.ws(f"after={last}") as ws:
        again = receive(ws)
        assert again["type"] == "snapshot"
        assert again["seq"] >= last
        after = events_until(ws, finished(second))
    seqs = [e["seq"] for e in before + after]
    assert seqs == list(range(snap["seq"] + 1, seqs[-1] + 1))  # no gap, no repeat
    assert before + after == log(office, snap["seq"], seqs[-1])


def test_a_watcher_far_behind_catches_up_from_the_store(fresh_office) -> None:
    # With a tiny in-memory buffer, a watcher starting from the beginning of a long log is
    # served from the store until it catches up, then live.
    small: Running = fresh_office(hub_buffer=5)
    for goal in ("Hire a CFO", "Find an office"):
        small.finish(small.submit(goal)["id"])
    with small.client() as c:
        head = c.get("/api/events").json()["last_seq"]
    assert head > 20

    with small.ws("after=0") as ws:
        assert receive(ws)["type"] == "snapshot"
        old = events_until(ws, lambda e: e["seq"] >= head)
        root = small.submit("Buy a coffee machine")["id"]
        new = events_until(ws, finished(root))
    seqs = [e["seq"] for e in old + new]
    assert seqs == list(range(1, len(seqs) + 1))
    assert old + new == log(small, 0, seqs[-1])


def test_an_after_beyond_the_log_starts_from_the_snapshot(office: Running) -> None:
    with office.ws("after=999999999") as ws:
        snap = receive(ws)
        root = office.submit("Count the chairs")["id"]
        seen = events_until(ws, finished(root))
    assert seen[0]["seq"] == snap["seq"] + 1


def test_bad_parameters_close_the_socket(office: Running) -> None:
    from websockets.exceptions import ConnectionClosed, InvalidStatus

    for query in ("after=-1", "after=soon"):
        try:
            with office.ws(query) as ws:
                ws.recv(timeout=10)
        except (ConnectionClosed, InvalidStatus):
            continue
        raise AssertionError(f"{query} was accepted")
