"""Engine test helpers: a brain scripted per agent, and waiting utilities."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from firm.session import Session

Script = Callable[[Session], str | None]


@dataclass
class ScriptedBrain:
    """Runs a Python function per agent id; records every session it ran."""

    scripts: dict[str, Script]
    default: Script | None = None
    name: str = "scripted"
    sessions: list[tuple[str, str, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, session: Session) -> str | None:
        with self.lock:
            self.sessions.append((session.task.id, session.agent_id, session.task.turn))
        script = self.scripts.get(session.agent_id, self.default)
        if script is None:
            raise AssertionError(f"no script for {session.agent_id}")
        return script(session)
