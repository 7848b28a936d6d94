"""The API for people talking to the company: notes on tasks, and agents' questions.

Writing (a note, an answer) needs a token (FIRM_TOKEN, or a named one from FIRM_TOKENS); the
name the token stands for is what the signed log records as the author.
"""

# No `from __future__ import annotations`: FastAPI reads the handlers' annotations at run time.
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from firm.errors import AlreadyDecided
from firm.people import TEXT_MAX
from firm.server.models import error_responses
from firm.server.office import Office
from firm.server.routes import TaskId, read_guard, read_security, token_holder
from firm.store.questions import QuestionNotFound

QuestionId = Annotated[
    str, Path(min_length=1, max_length=64, description="A question id, e.g. Q-1a2b3c4d")
]


class NoteOut(BaseModel):
    seq: int
    task_id: str
    by: str
    text: str
    at: float


class NoteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: Annotated[str, Field(min_length=1, max_length=TEXT_MAX)]


class QuestionOut(BaseModel):
    id: str
    task_id: str
    root_id: str
    agent: str
    question: str
    status: str
    asked_at: float
    answered_at: float | None
    answered_by: str | None
    answer: str | None


class AnswerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: Annotated[str, Field(min_length=1, max_length=TEXT_MAX)]


def build_router(office: Office) -> APIRouter:
    policy = office.policy
    store = office.store
    may_read = read_guard(policy)
    router = APIRouter(prefix="/api")
    Who = Annotated[str, Depends(token_holder(policy))]

    @router.get(
        "/tasks/{task_id}/notes",
        responses=error_responses(401, 403, 404),
        summary="The notes people left on a task, oldest first",
        dependencies=[Depends(may_read)],
        openapi_extra=read_security(policy),
    )
    def list_notes(task_id: TaskId) -> list[NoteOut]:
        store.get_task(task_id)  # 404 for an unknown task
        return [NoteOut(**n.to_dict()) for n in store.notes(task_id)]

    @router.post(
        "/tasks/{task_id}/notes",
        responses=error_responses(400, 401, 404),
        summary="Leave a note on a task: in the log, and in the task's next brief",
        status_code=201,
    )
    def add_note(task_id: TaskId, who: Who, body: NoteRequest) -> NoteOut:
        return NoteOut(**store.add_note(task_id, who, body.text).to_dict())

    @router.get(
        "/questions",
        responses=error_responses(401, 403),
        summary="Questions agents asked that wait for an answer (or all, with status=all)",
        dependencies=[Depends(may_read)],
        openapi_extra=read_security(policy),
    )
    def list_questions(
        status: Annotated[Literal["pending", "answered", "withdrawn", "all"], Query()] = "pending",
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    ) -> list[QuestionOut]:
        items = store.questions(status=None if status == "all" else status, limit=limit)
        return [QuestionOut(**q.to_dict()) for q in items]

    @router.post(
        "/questions/{question_id}/answer",
        responses=error_responses(400, 401, 404, 409),
        summary="Answer an agent's question: the answer is its ask_human call's result",
    )
    def answer(question_id: QuestionId, who: Who, body: AnswerRequest) -> QuestionOut:
        try:
            answered = store.answer_question(question_id, who, body.answer)
        except QuestionNotFound as exc:
            raise HTTPException(404, str(exc)) from None
        except AlreadyDecided as exc:
            raise HTTPException(409, str(exc)) from None
        return QuestionOut(**answered.to_dict())

    return router
