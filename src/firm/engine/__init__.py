"""The engine: scheduling sessions, settling and waking, cancelling, recovering."""

from firm.engine.company import Company
from firm.engine.runs import resolve_workspace
from firm.engine.scheduler import Engine
from firm.engine.workers import make_worker_id, worker_alive

__all__ = ["Company", "Engine", "make_worker_id", "resolve_workspace", "worker_alive"]
