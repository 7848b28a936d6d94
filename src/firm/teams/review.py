"""human_input: a person reviews a team task's output before it counts as done.

When the agent of a task marked `human_input=True` delivers, the coordinator asks a person —
a question in firm's own machinery (ask_human: `firm questions`, `firm answer`, the API), so
the run waits holding no worker and survives restarts. An answer that accepts ("accept",
"ok", "yes", …) delivers the output; any other answer is feedback: the task goes back to its
agent with its earlier output and the feedback. Each question names the attempt it reviews
(`[review T-…]`), so the reviews are read back from the root task's log entries alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from firm.events import EventKind
from firm.people import TEXT_MAX
from firm.store.base import Event

_REVIEW = re.compile(r"^\[review (T-[0-9A-Za-z_-]+)\]")
ACCEPTING = frozenset(
    {"accept", "accepted", "ok", "okay", "yes", "y", "lgtm", "approve", "approved", "fine"}
)
OUTPUT_SHOWN = TEXT_MAX - 800  # of the output, in the question (the rest is the prompt)


@dataclass(frozen=True)
class Review:
    """A person's review of one attempt (a firm task) at a team task."""

    question_id: str
    answer: str | None  # None: no answer yet
    by: str | None = None

    @property
    def accepted(self) -> bool:
        return self.answer is not None and accepts(self.answer)


def accepts(answer: str) -> bool:
    """Whether an answer accepts the output (anything else is feedback)."""
    return answer.strip().lower().rstrip(".!") in ACCEPTING


# The entries reviews_from reads: read those kinds only.
REVIEW_KINDS = (EventKind.QUESTION_ASKED, EventKind.QUESTION_ANSWERED)


def reviews_from(events: Iterable[Event]) -> dict[str, Review]:
    """The reviews asked for in these entries (the root task's), by the attempt reviewed."""
    attempt_of: dict[str, str] = {}
    out: dict[str, Review] = {}
    for e in events:
        data = e.data or {}
        if e.kind == EventKind.QUESTION_ASKED:
            m = _REVIEW.match(str(data.get("question", "")))
            if m is not None:
                attempt_of[str(data.get("id"))] = m.group(1)
                out[m.group(1)] = Review(str(data.get("id")), None)
        elif e.kind == EventKind.QUESTION_ANSWERED:
            attempt = attempt_of.get(str(data.get("id")))
            if attempt is not None:
                out[attempt] = Review(str(data["id"]), str(data.get("answer")), data.get("by"))
    return out


def review_question(task_id: str, attempt: str, agent_name: str, output: str) -> str:
    """What the person is asked about one attempt's output."""
    shown = output.strip()
    if len(shown) > OUTPUT_SHOWN:
        shown = shown[:OUTPUT_SHOWN].rstrip() + f" … [{len(output) - OUTPUT_SHOWN} more characters]"
    return (
        f"[review {attempt}] {agent_name} finished the team task '{task_id}', which asks for a "
        "person's review (human_input). Its output:\n\n"
        f"{shown}\n\n"
        f"Answer 'accept' to accept it as it is, or write your feedback: the task goes back "
        f"to {agent_name} with it."
    )
