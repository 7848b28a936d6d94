"""The HTTP API over a real server: goals, tasks, subtrees, cancellation, the log, the org."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from office_kit import Running


def test_a_goal_becomes_a_task_and_the_company_works_it(office: Running) -> None:
    created = office.submit("Launch an AI note-taking app")
    assert created["id"].startswith("T-")
    assert created["status"] == "todo"
    assert created["assignee"] == "ceo"
    assert created["root_id"] == created["id"]

    done = office.finish(created["id"])
    assert done["status"] == "done", done
    assert done["result"]
    # CEO -> 2 managers -> 4 leaves, every one of them done, each linked to its parent.
    subtree = done["subtree"]
    assert len(subtree) == 6
    ids = {done["id"]} | {t["id"] for t in subtree}
    assert all(t["parent_id"] in ids and t["status"] == "done" for t in subtree)
    assert {t["assignee"] for t in subtree} == {"cto", "cmo", "gabriel", "hana", "maya", "omar"}
    assert done["counts"] == {"done": 7}
    # Every deliverable is listed once, and really is in the workspace.
    assert len(done["tree_files"]) == len(set(done["tree_files"])) >= 7
    for path in done["tree_files"]:
        assert (office.workspace / path).is_file()


def test_a_goal_can_go_to_a_named_agent(office: Running) -> None:
    created = office.submit("Rebuild the search backend", to="cto", priority="high")
    assert created["assignee"] == "cto"
    assert created["priority"] == "high"
    done = office.finish(created["id"])
    assert {t["assignee"] for t in done["subtree"]} == {"gabriel", "hana"}
    assert all(t["priority"] == "high" for t in done["subtree"])  # inherited down the tree


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        ({"goal": ""}, 422, "goal"),
        ({"goal": "   \n "}, 422, "goal"),
        ({}, 422, "goal"),
        ({"goal": "x", "to": "nobody"}, 422, "ceo"),  # the error lists who there is
        ({"goal": "x", "to": "Not An Id!"}, 422, "to"),
        ({"goal": "x", "priority": "asap"}, 422, "priority"),
        ({"goal": "x", "colour": "blue"}, 422, "colour"),
        ({"goal": "x" * 20_001}, 422, "goal"),
        ([1, 2], 422, "object"),
    ],
)
def test_a_bad_goal_gets_a_4xx_that_says_what_is_wrong(
    office: Running, body: object, code: int, words: str
) -> None:
    with office.client() as c:
        r = c.post("/api/tasks", json=body)
    assert r.status_code == code, r.text
    assert words in r.text.lower()


def test_a_request_that_is_not_json_gets_a_4xx(office: Running) -> None:
    with office.client() as c:
        r = c.post("/api/tasks", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 422
    assert "json" in r.text.lower()


# JSON may spell a lone UTF-16 surrogate (\ud800); no UTF-8 text can hold one, so an answer
# that echoed it back would fail to encode: the office must still say what is wrong.
SURROGATE_BODIES = [
    ("/api/tasks", rb'{"goal": "Surrogate goal \ud800"}', "goal"),
    ("/api/tasks", rb'{"goal": "Surrogate goal", "to": "\udfff"}', "to"),
    ("/api/tasks", rb'{"goal": "Surrogate goal", "language": "e\ud83d"}', "language"),
    ("/api/tasks", rb'{"goal": "Surrogate goal", "\ud800": 1}', "body"),
    ("/api/tasks/T-00000000/cancel", rb'{"reason": "\ud800"}', "reason"),
]


@pytest.mark.parametrize(("path", "body", "field"), SURROGATE_BODIES)
def test_a_lone_surrogate_gets_a_4xx_that_says_so(
    office: Running, path: str, body: bytes, field: str
) -> None:
    with office.client() as c:
        r = c.post(path, content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 422, r.text
        (error,) = r.json()["detail"]
        assert error["loc"][-1] == field
        assert "surrogate" in error["msg"]
        if "input" in error:  # echoed, but spelled out rather than sent as it came
            assert "\\ud" in str(error["input"]), error
        titles = [t["title"] for t in c.get("/api/tasks", params={"limit": 1000}).json()["tasks"]]
    assert not any(title.startswith("Surrogate goal") for title in titles)


def test_tasks_list_filters_and_pages(office: Running) -> None:
    root = office.submit("Write the quarterly report")["id"]
    office.finish(root)
    with office.client() as c:
        mine = c.get("/api/tasks", params={"root": root, "limit": 1000}).json()
        assert {t["root_id"] for t in mine["tasks"]} == {root}
        assert len(mine["tasks"]) == 7 and mine["next_offset"] is None

        leaves = c.get("/api/tasks", params={"root": root, "assignee": "gabriel"}).json()["tasks"]
        assert [t["assignee"] for t in leaves] == ["gabriel"]

        done = c.get("/api/tasks", params={"status": "done", "root": root}).json()["tasks"]
        assert len(done) == 7

        # Page through in twos: disjoint pages that add up to the whole list, in order.
        pages, offset = [], 0
        while offset is not None:
            page = c.get("/api/tasks", params={"root": root, "limit": 2, "offset": offset}).json()
            assert page["limit"] == 2 and len(page["tasks"]) <= 2
            pages += page["tasks"]
            offset = page["next_offset"]
        assert [t["id"] for t in pages] == [t["id"] for t in mine["tasks"]]

        for bad in ({"status": "finished"}, {"limit": 0}, {"limit": 5000}, {"offset": -1}):
            r = c.get("/api/tasks", params=bad)
            assert r.status_code == 422, (bad, r.text)
            assert next(iter(bad)) in r.text


def test_an_unknown_task_is_a_404_with_its_id(office: Running) -> None:
    with office.client() as c:
        for r in (c.get("/api/tasks/T-00000000"), c.post("/api/tasks/T-00000000/cancel")):
            assert r.status_code == 404
            assert "T-00000000" in r.json()["detail"]


LEAVES = {"gabriel", "hana", "maya", "omar"}


def leaves_at_work(detail: dict) -> bool:
    return any(t["assignee"] in LEAVES and t["status"] == "in_progress" for t in detail["subtree"])


def test_cancelling_a_running_goal_cancels_its_whole_open_tree(slow_office: Running) -> None:
    root = slow_office.submit("Plan the company offsite")["id"]
    # Wait until the leaves are at work: the tree is three levels deep and busy.
    slow_office.wait_until(root, leaves_at_work)
    with slow_office.client() as c:
        r = c.post(f"/api/tasks/{root}/cancel", json={"reason": "the offsite is off"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["task"]["status"] == "cancelled"
    assert body["task"]["error"] == "the offsite is off"
    assert root in body["cancelled"] and len(body["cancelled"]) >= 3

    after = slow_office.finish(root)
    assert after["status"] == "cancelled"
    assert all(t["status"] in ("cancelled", "done") for t in after["subtree"])
    assert {t["id"] for t in after["subtree"] if t["status"] == "cancelled"} <= set(
        body["cancelled"]
    )
    time.sleep(1.2)  # two more turns of latency: nothing cancelled comes back to life
    again = slow_office.task(root)
    assert [t["status"] for t in again["subtree"]] == [t["status"] for t in after["subtree"]]

    with slow_office.client() as c:
        r = c.post(f"/api/tasks/{root}/cancel")
        assert r.status_code == 409
        assert "already cancelled" in r.json()["detail"]
        # One entry records the whole cancel, on the goal; a subtask's history still shows it
        # (the office's drawer lists a task's events from here), and no other goal's entries.
        sub = next(t for t in after["subtree"] if t["parent_id"] and t["status"] == "cancelled")
        history = c.get("/api/events", params={"task": sub["id"]}).json()["events"]
    ended = [e for e in history if e["kind"] == "cancelled"]
    assert [(e["task_id"], e["data"]["reason"]) for e in ended] == [(root, "the offsite is off")]
    assert {e["task_id"] for e in history} == {sub["id"], root}
    assert [e["seq"] for e in history] == sorted(e["seq"] for e in history)


def test_a_cancelled_subtask_reaches_its_manager_who_still_reports(
    fresh_office: Callable[..., Running],
) -> None:
    # Each session stays open 2 s after acting: the cancel lands while Gabriel still works,
    # however slow the machine (with only a turn's latency he could finish first).
    slow_office = fresh_office(latency=0.3, linger=2.0)
    root = slow_office.submit("Open an office in Lisbon")["id"]
    detail = slow_office.wait_until(
        root,
        lambda d: any(
            t["assignee"] == "gabriel" and t["status"] in ("todo", "in_progress")
            for t in d["subtree"]
        ),
    )
    gabriel = next(t for t in detail["subtree"] if t["assignee"] == "gabriel")
    with slow_office.client() as c:
        r = c.post(f"/api/tasks/{gabriel['id']}/cancel", json={"reason": "not needed"})
    assert r.status_code == 200
    assert r.json()["cancelled"] == [gabriel["id"]]

    done = slow_office.finish(root)
    assert done["status"] == "done"
    cto = next(t for t in done["subtree"] if t["assignee"] == "cto")
    assert "not needed" in cto["result"]  # the manager's report says what was not delivered


def test_the_event_log_pages_in_order_without_gaps(office: Running) -> None:
    with office.client() as c:
        start = c.get("/api/events", params={"after": 10**9}).json()["last_seq"]
        root = office.submit("Hire a designer")["id"]
        office.finish(root)
        everything = c.get("/api/events", params={"after": start, "limit": 1000}).json()
        seqs = [e["seq"] for e in everything["events"]]
        assert seqs == list(range(start + 1, start + 1 + len(seqs)))
        kinds = [e["kind"] for e in everything["events"] if e["task_id"] == root]
        # A root that ends gets its log head signed: the checkpoint follows the completion.
        assert kinds[0] == "created" and kinds[-2:] == ["completed", "checkpoint"]

        paged, after = [], start
        while True:
            page = c.get("/api/events", params={"after": after, "limit": 7}).json()
            if not page["events"]:
                assert page["next_after"] == after
                break
            paged += page["events"]
            after = page["next_after"]
        assert paged[: len(seqs)] == everything["events"]

        only = c.get("/api/events", params={"task": root, "after": start}).json()["events"]
        assert only and {e["task_id"] for e in only} == {root}

        for bad in ({"after": -1}, {"limit": 0}, {"limit": 100_000}, {"after": "yesterday"}):
            assert c.get("/api/events", params=bad).status_code == 422


def test_the_org_chart(office: Running) -> None:
    with office.client(token=None) as c:
        org = c.get("/api/org").json()
    assert org["company"] == "Acme AI"
    assert org["top"] == ["ceo"]
    by_id = {a["id"]: a for a in org["agents"]}
    assert by_id["cto"]["reports"] == ["gabriel", "hana"]
    assert by_id["gabriel"]["reports_to"] == "cto"
    assert by_id["ceo"]["tools"] == ["files.*"]
    assert org["brain"] == "simulation"
    assert org["workspace"] == str(office.workspace)


def test_the_page_and_the_docs_are_served(office: Running) -> None:
    with office.client(token=None) as c:
        page = c.get("/")
        assert page.status_code == 200
        assert 'type="module"' in page.text
        assert "default-src 'self'" in page.headers["content-security-policy"]
        for asset in ("app.js", "office.css", "state.js", "favicon.svg"):
            assert c.get(f"/{asset}").status_code == 200, asset
        schema = c.get("/openapi.json").json()
        assert {"/api/tasks", "/api/tasks/{task_id}", "/api/events", "/api/org"} <= set(
            schema["paths"]
        )
        docs = c.get("/docs")
        assert docs.status_code == 200
        # Everything the docs page loads comes from the office itself, not from the internet.
        loads = re.findall(r'(?:src|href)="([^"]+)"', docs.text)
        assert loads and all(re.match(r"/[^/]", url) for url in loads), loads
        for url in loads:
            assert c.get(url).status_code == 200, url
