"""Checkpoints: the log's head signed with the company key and recorded in the log itself.

A `checkpoint` event holds the seq and hash it signs (an earlier entry: the event cannot sign
itself) and the signature, so anyone holding the public key can later check that the log up to
that entry is the one the company had. The engine makes one when a run's root task ends;
export makes one for the last entry of the bundle it writes.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable

from firm import idlethreads
from firm.audit.keys import AuditKey, key_dir_for, load_or_create_key
from firm.events import EventKind
from firm.store.base import Event, Store
from firm.tasks import Task

log = logging.getLogger("firm.audit")

# Runs looked at on start: a kill loses at most the checkpoint of the runs ending at that moment.
RESUME_LOOKBACK = 20
KEY_WAIT = 10.0  # seconds a stopping engine waits for the key being made (a few fsyncs)


def entry_at(store: Store, seq: int) -> Event:
    found = store.events_after(seq - 1, limit=1)
    if not found or found[0].seq != seq:
        raise LookupError(f"the log has no entry {seq}")
    return found[0]


def sign_entry(
    store: Store, key: AuditKey, seq: int, *, task_id: str | None, reason: str
) -> dict[str, object]:
    """Sign the entry at `seq` and record the checkpoint; returns the signed head."""
    entry = entry_at(store, seq)
    signed = {
        "seq": entry.seq,
        "hash": entry.hash,
        "signature": key.sign_head(entry.seq, entry.hash),
        "public_key": key.public_text,
    }
    store.append_events([(EventKind.CHECKPOINT, task_id, None, {**signed, "reason": reason})])
    return signed


class Checkpointer:
    """Signs the log's head when runs end. Loads (or makes) the key on first need; a key that
    cannot be had is logged, never allowed to stop the engine."""

    def __init__(self, store: Store):
        self.store = store
        self._key: AuditKey | None = None
        self._lock = threading.Lock()
        self._early: idlethreads.Job | None = None
        self._closing = threading.Event()  # set by close: an early load still waiting gives up

    @property
    def key(self) -> AuditKey:
        with self._lock:
            if self._key is None:
                self._key = load_or_create_key(key_dir_for(self.store.url))
            return self._key

    def checkpoint(self, task_id: str | None, reason: str) -> dict[str, object] | None:
        try:
            return sign_entry(
                self.store, self.key, self.store.last_seq(), task_id=task_id, reason=reason
            )
        except Exception:
            log.exception("could not sign the audit log's head")
            return None

    def after_cancel(self, top: str, ended: Iterable[str]) -> None:
        """After a cancel of `top`'s subtree that ended these tasks: only `top` can be a run's
        root, so only it is read back."""
        if top in ended:
            try:
                self.after_ended([self.store.get_task(top)])
            except Exception:
                log.exception("could not read the cancelled task back to sign its run's end")

    def after_ended(self, tasks: Iterable[Task]) -> None:
        for t in tasks:
            if t.parent_id is None and t.terminal:
                self.checkpoint(t.id, f"run {t.id} ended ({t.status})")

    def _load_key_early(self) -> None:
        # Off the run's path: made on first use, the key costs a few fsyncs (keys.py), at the
        # moment a run ends and the caller is waiting for it. A failure here is left to the
        # checkpoint, which tries again and logs it. A store that asks its start-up's
        # background work to wait (Team.start: its run begins with a model's wait) has it
        # loaded then.
        delay = self.store.background_delay
        if delay and self._closing.wait(delay):
            return
        with contextlib.suppress(Exception):
            self.key  # noqa: B018 - loads (or makes) it

    def close(self) -> None:
        """Wait for the key being loaded early, so nothing is written once the engine stops."""
        self._closing.set()
        if self._early is not None:
            self._early.join(KEY_WAIT)

    def catch_up(self, lookback: int = RESUME_LOOKBACK) -> list[str]:
        """Sign the end of every recent run that ended without its checkpoint (a kill between
        the root's ending and the signature); returns those runs' ids. Called on start, so a
        run's record is signed whole even when the process that finished it was not; the
        key is loaded meanwhile in a thread of its own, for the checkpoints to come."""
        if self._key is None and self._early is None:
            # On one of the process's idle threads (firm/idlethreads.py): a thread started
            # for it waited for the interpreter lock at the run's start.
            self._early = idlethreads.run(self._load_key_early, "firm-audit-key")
        signed: list[str] = []
        if getattr(self.store, "created", False):
            return signed  # a store this process has just made: no run ended unsigned in it
        try:
            roots = [s.root for s in self.store.run_summaries(limit=lookback)]
        except Exception:
            log.exception("could not look for runs that ended unsigned")
            return signed
        for root in roots:
            if not root.terminal:
                continue
            span = self.store.event_span([root.id])
            if span is None or entry_at(self.store, span[1]).kind == EventKind.CHECKPOINT:
                continue
            if self.checkpoint(root.id, f"run {root.id} ended ({root.status}); signed on resume"):
                signed.append(root.id)
        return signed
