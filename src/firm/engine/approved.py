"""Calls a person approved: run before the brain starts, each exactly once, with exactly the
arguments that were approved (docs/architecture.md, "Approvals")."""

from __future__ import annotations

from firm.audit import recordable
from firm.callrecord import CallRecord, refusal
from firm.chain import digest
from firm.errors import ToolError
from firm.events import EventKind
from firm.session import Session
from firm.store.approvals import Approval


def run_approved(session: Session) -> None:
    """Each approved call is claimed in the store before its body runs; a claim an earlier
    session left without a result is reported as "may have run" (by the brief), never run
    again."""
    claimed, _lost = session.store.claim_approved(session.task_id, session.worker_id)
    for approval in claimed:
        _run_one(session, approval)


def _refused(session: Session, approval: Approval, name: str, message: str) -> None:
    entry = (EventKind.TOOL_ERROR, session.task_id, session.agent_id, refusal(name, message))
    session.store.finish_approved(
        approval.id, session.worker_id, f"error: {message}", False, [entry]
    )


def _run_one(session: Session, approval: Approval) -> None:
    tool = session.company.registry.find(approval.tool)
    if tool is None:
        message = f"{approval.tool} is no longer among the company's tools; it did not run"
        return _refused(session, approval, approval.tool, message)
    standing, _ = session.standing()
    try:
        args, given = tool.parse(dict(approval.args))
        record = CallRecord.prepare(tool, args, given, standing)
    except ToolError as exc:
        message = f"the approved arguments no longer fit {tool.name}: {exc}"
        return _refused(session, approval, tool.name, message)
    # The authority check runs again: a grant that expired or was revoked while the call
    # waited stops it here, approval or not.
    denial = session.company.check(standing, tool, args, given)
    if denial is not None or record.data["args_digest"] != approval.args_digest:
        reason = str(denial) if denial is not None else "the arguments changed"
        data = {
            **record.data,
            "allowed": False,
            "code": denial.code if denial is not None else "approval_mismatch",
            "reason": recordable.text(reason),
            "approval": approval.id,
        }
        entry = (EventKind.TOOL_DENIED, session.task_id, session.agent_id, data)
        session.store.finish_approved(
            approval.id, session.worker_id, f"error: {reason}", False, [entry]
        )
        return None
    content, ok = session.run_body(tool, args)
    data = {
        **record.data,
        "allowed": True,
        "ok": ok,
        "result_digest": digest(content),
        "approval": approval.id,
    }
    if not ok:
        data["error"] = content[:500]
    entry = (EventKind.TOOL_CALL, session.task_id, session.agent_id, data)
    session.store.finish_approved(approval.id, session.worker_id, content, ok, [entry])
    return None
