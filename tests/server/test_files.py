"""GET /api/files: the workspace, read-only, with the agents' confinement, shown never run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from office_kit import Running


@pytest.fixture(scope="module")
def delivered(office: Running) -> dict:
    root = office.submit("Write the launch announcement")["id"]
    return office.finish(root)


def test_a_delivered_file_is_served_as_plain_text(office: Running, delivered: dict) -> None:
    path = delivered["tree_files"][0]
    with office.client(token=None) as c:
        r = c.get(f"/api/files/{path}")
    assert r.status_code == 200
    assert r.text == (office.workspace / path).read_text(encoding="utf-8")
    assert r.headers["content-type"].startswith("text/plain")
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in r.headers["content-security-policy"]


def test_a_file_of_a_named_run_comes_from_that_runs_workspace(
    office: Running, delivered: dict, tmp_path: Path
) -> None:
    # A run started elsewhere (say `firm run` with --workspace) has a workspace of its own.
    other = tmp_path / "elsewhere"
    root = office.office.firm.engine.submit(
        office.office.org, "Draft a press kit", workspace=other, org_yaml=office.office.org_yaml
    )
    done = office.finish(root.id)
    path = done["tree_files"][0]
    assert (other / path).is_file() and not (office.workspace / path).exists()
    with office.client(token=None) as c:
        assert c.get(f"/api/files/{path}").status_code == 404
        r = c.get(f"/api/files/{path}", params={"run": root.id})
        assert r.status_code == 200 and r.text == (other / path).read_text(encoding="utf-8")
        assert c.get(f"/api/files/{path}", params={"run": "T-00000000"}).status_code == 404


def test_html_an_agent_wrote_is_shown_not_run(office: Running) -> None:
    (office.workspace / "page.html").write_text("<script>alert(1)</script>", encoding="utf-8")
    with office.client(token=None) as c:
        r = c.get("/api/files/page.html")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    assert "sandbox" in r.headers["content-security-policy"]


@pytest.mark.parametrize(
    "raw_path",
    [
        "/api/files/..%2Fcompany.yaml",
        "/api/files/%2E%2E/company.yaml",
        "/api/files/a/..%2F..%2Fcompany.yaml",
        "/api/files/%2Fetc%2Fpasswd",
        "/api/files/~%2F.bashrc",
        "/api/files/outside-link/company.yaml",
        "/api/files/secret-link",
        "/api/files/zero",
    ],
)
def test_nothing_outside_the_workspace_can_be_read(office: Running, raw_path: str) -> None:
    ws = office.workspace
    if not (ws / "outside-link").is_symlink():
        (ws / "outside-link").symlink_to(office.folder, target_is_directory=True)
        (ws / "secret-link").symlink_to(office.folder / "company.yaml")
        (ws / "zero").symlink_to("/dev/zero")
    with office.client(token=None) as c:
        r = c.send(c.build_request("GET", raw_path))
    assert r.status_code == 403, (raw_path, r.status_code, r.text)
    assert "company:" not in r.text and "root:" not in r.text
    assert r.json()["detail"]


def test_missing_folders_and_special_files_get_clear_4xx(office: Running) -> None:
    ws = office.workspace
    (ws / "folder").mkdir(exist_ok=True)
    fifo = ws / "pipe"
    if not fifo.exists():
        os.mkfifo(fifo)
    with office.client(token=None) as c:
        missing = c.get("/api/files/no/such/file.md")
        assert missing.status_code == 404 and "not in the workspace" in missing.json()["detail"]
        folder = c.get("/api/files/folder")
        assert folder.status_code == 400 and "folder" in folder.json()["detail"]
        pipe = c.get("/api/files/pipe")
        assert pipe.status_code == 400 and "not a regular file" in pipe.json()["detail"]


def test_a_large_file_comes_back_cut_and_says_so(office: Running) -> None:
    big = office.workspace / "big.txt"
    big.write_bytes(b"x" * (1024 * 1024 + 10))
    with office.client(token=None) as c:
        r = c.get("/api/files/big.txt")
    assert r.status_code == 200
    assert len(r.content) == 1024 * 1024
    assert r.headers["x-firm-truncated"] == "true"
    assert r.headers["x-firm-size"] == str(1024 * 1024 + 10)
