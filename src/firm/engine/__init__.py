"""The engine: scheduling sessions, settling and waking, cancelling, recovering."""

from firm.engine.company import Company
from firm.engine.scheduler import Engine, make_worker_id, resolve_workspace, worker_alive

__all__ = ["Company", "Engine", "make_worker_id", "resolve_workspace", "worker_alive"]
