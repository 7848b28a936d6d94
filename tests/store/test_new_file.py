"""A new SQLite store is written whole from the schema's image, its sync beside the opener's
other work: the name still comes only after the pages are on disk, and a name that cannot
be placed leaves the store to be opened (or made) as before."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from firm.api import Firm
from firm.org import OrgChart
from firm.store import open_store
from firm.tasks import Status


def test_the_name_comes_after_the_image_is_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "firm.db"
    seen: list[tuple[str, Any]] = []
    fsync, link = os.fsync, os.link

    def synced(fd: int) -> None:
        seen.append(("sync", os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)

    def linked(src: Any, dst: Any) -> None:
        seen.append(("link", str(dst)))
        link(src, dst)

    monkeypatch.setattr(os, "fsync", synced)
    monkeypatch.setattr(os, "link", linked)
    store = open_store(path)
    try:
        assert store.created
        steps = [kind for kind, _ in seen]
        assert steps[:2] == ["sync", "link"]
        assert seen[0][1].endswith(".new")  # the image, beside the name, before the link
        assert seen[1][1] == str(path)
        assert store.events_after(0) == []
    finally:
        store.close()
    assert ("sync", str(tmp_path)) in seen  # the folder holding the name, by the close
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".new")] == []


def test_a_store_made_meanwhile_elsewhere_is_opened_not_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, three_levels: OrgChart
) -> None:
    path = tmp_path / "firm.db"
    with Firm(tmp_path / "other.db") as other:  # the store another process made first
        root = other.submit(three_levels, "Made by the other process")
    link = os.link

    def beaten(src: Any, dst: Any) -> None:
        link(tmp_path / "other.db", dst)  # it got the name in between
        link(src, dst)  # FileExistsError, as the other process's file is there

    monkeypatch.setattr(os, "link", beaten)
    store = open_store(path)
    try:
        assert not store.created
        assert store.get_task(root.id).title == "Made by the other process"
    finally:
        store.close()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".new")] == []


def test_an_image_that_cannot_be_synced_leaves_no_name_and_the_store_is_made_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, three_levels: OrgChart
) -> None:
    path = tmp_path / "firm.db"
    fsync = os.fsync

    def failing(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".new"):
            raise OSError(5, "Input/output error")
        fsync(fd)

    monkeypatch.setattr(os, "fsync", failing)
    with Firm(path) as firm:
        assert not firm.store.created  # made by the migrations instead
        root = firm.run(three_levels, "Launch the product")
        assert root.status == Status.DONE
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".new")] == []


def test_stores_made_one_after_another_on_threads_each_get_their_own_file(
    tmp_path: Path,
) -> None:
    import threading

    stores: list[Any] = []
    lock = threading.Lock()

    def make(i: int) -> None:
        s = open_store(tmp_path / f"s{i}.db")
        with lock:
            stores.append(s)

    threads = [threading.Thread(target=make, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert len(stores) == 6 and all(s.created for s in stores)
        inodes = {os.stat(tmp_path / f"s{i}.db").st_ino for i in range(6)}
        assert len(inodes) == 6
    finally:
        for s in stores:
            s.close()
