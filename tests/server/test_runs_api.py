"""The runs API over a real server: every goal with its totals, and one goal's events to replay."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from office_kit import Running


def runs_page(office: Running, **params: Any) -> dict[str, Any]:
    with office.client(token=None) as c:  # reading on loopback needs no token
        r = c.get("/api/runs", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def all_run_events(office: Running, run_id: str, limit: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    after = 0
    with office.client(token=None) as c:
        while True:
            r = c.get(f"/api/runs/{run_id}/events", params={"after": after, "limit": limit})
            assert r.status_code == 200, r.text
            page = r.json()
            assert len(page["events"]) <= limit
            events += page["events"]
            after = page["next_after"]
            if not page["more"]:
                return events


@pytest.fixture(scope="module")
def worked(slow_office: Running) -> tuple[Running, list[dict[str, Any]]]:
    """Three goals worked at the same time, so their events interleave in the log."""
    goals = [
        slow_office.submit("Launch an AI note-taking app"),
        slow_office.submit("Rebuild the search backend", to="cto"),
        slow_office.submit("Plan the spring campaign", to="cmo"),
    ]
    return slow_office, [slow_office.finish(g["id"]) for g in goals]


def test_runs_are_listed_newest_first_with_their_totals(
    worked: tuple[Running, list[dict[str, Any]]],
) -> None:
    office, goals = worked
    leaf = next(t for t in goals[0]["subtree"] if t["assignee"] == "maya")
    office.office.store.add_usage(leaf["id"], 3, 1200, 300)
    office.office.store.add_usage(goals[0]["id"], 2, 800, 100)

    runs = runs_page(office)["runs"]
    assert [r["id"] for r in runs] == [g["id"] for g in reversed(goals)]
    first = runs[-1]
    assert first["title"] == "Launch an AI note-taking app"
    assert first["status"] == "done" and first["assignee"] == "ceo"
    assert first["tasks"] == 7 and first["counts"] == {"done": 7}
    assert (first["calls"], first["prompt_tokens"], first["completion_tokens"]) == (5, 2000, 400)
    assert first["started_at"] <= first["finished_at"]
    assert first["result"]
    assert runs[0]["tasks"] == 3 and runs[0]["calls"] == 0  # the CMO's run: CMO + 2 reports


def test_runs_page_without_gaps_or_repeats(worked: tuple[Running, list[dict[str, Any]]]) -> None:
    office, goals = worked
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = runs_page(office, limit=2, offset=offset)
        assert len(page["runs"]) <= 2
        seen += [r["id"] for r in page["runs"]]
        offset = page["next_offset"]
    assert seen == [r["id"] for r in runs_page(office)["runs"]]
    assert len(seen) == len(set(seen)) >= len(goals)


@pytest.mark.parametrize("limit", [1, 7, 1000])
def test_a_runs_events_are_its_own_in_order_and_page_cleanly(
    worked: tuple[Running, list[dict[str, Any]]], limit: int
) -> None:
    office, goals = worked
    with office.client() as c:
        log = c.get("/api/events", params={"limit": 1000}).json()["events"]
    for goal in goals:
        tree = {goal["id"]} | {t["id"] for t in goal["subtree"]}
        events = all_run_events(office, goal["id"], limit)
        seqs = [e["seq"] for e in events]
        assert seqs == sorted(seqs) and len(seqs) == len(set(seqs))
        assert {e["task_id"] for e in events} == tree  # every task of the tree, no other
        # Exactly the log's events of this tree: nothing missed, nothing borrowed.
        assert events == [e for e in log if e["task_id"] in tree]
        assert events[0]["kind"] == "created" and events[-1]["task_id"] == goal["id"]
    # The runs really did interleave, so the filter is doing the work.
    owners = [next(g["id"] for g in goals if e["task_id"] in _tree(g)) for e in log if e["task_id"]]
    switches = sum(1 for a, b in itertools.pairwise(owners) if a != b)
    assert switches > len(goals)


def _tree(goal: dict[str, Any]) -> set[str]:
    return {goal["id"]} | {t["id"] for t in goal["subtree"]}


def test_reading_on_after_the_end_gives_nothing_more(
    worked: tuple[Running, list[dict[str, Any]]],
) -> None:
    office, goals = worked
    last = all_run_events(office, goals[0]["id"], 1000)[-1]["seq"]
    with office.client(token=None) as c:
        page = c.get(f"/api/runs/{goals[0]['id']}/events", params={"after": last}).json()
    assert page == {"run": goals[0]["id"], "events": [], "next_after": last, "more": False}


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/api/runs/T-00000000/events", 404),
        ("/api/runs/{child}/events", 404),  # a task inside a run is not a run
        ("/api/runs?limit=0", 422),
        ("/api/runs?limit=201", 422),
        ("/api/runs?offset=-1", 422),
        ("/api/runs/{run}/events?after=-1", 422),
        ("/api/runs/{run}/events?limit=5001", 422),
    ],
)
def test_bad_run_requests_get_a_4xx(
    worked: tuple[Running, list[dict[str, Any]]], path: str, code: int
) -> None:
    office, goals = worked
    path = path.format(run=goals[0]["id"], child=goals[0]["subtree"][0]["id"])
    with office.client() as c:
        r = c.get(path)
    assert r.status_code == code, r.text
    assert r.json()["detail"]


def test_off_loopback_the_runs_need_the_token(fresh_office: Callable[..., Running]) -> None:
    office = fresh_office(reads_need_token=True)
    with office.client(token=None) as c:
        assert c.get("/api/runs").status_code == 401
    with office.client() as c:
        assert c.get("/api/runs").json()["runs"] == []
