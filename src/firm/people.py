"""What people write into a run — notes on tasks, answers to agents' questions — made canonical
and bounded before it is checked, stored or logged. Pure functions."""

from __future__ import annotations

import unicodedata

from firm.errors import FirmError

TEXT_MAX = 4000  # characters of a note, a question or an answer
NAME_MAX = 200  # characters of a person's name


class BadText(FirmError, ValueError):
    """A note, question or answer that cannot be taken: empty, or too long."""


def person_text(value: object, what: str, limit: int = TEXT_MAX) -> str:
    """The text as it will be logged: NFC, NUL and other control characters (but newlines and
    tabs) removed, surrounding blanks stripped; BadText if nothing is left or it is too long."""
    if not isinstance(value, str):
        raise BadText(f"the {what} must be text")
    if len(value) > 4 * limit:  # refuse before any per-character work on a huge input
        raise BadText(f"the {what} is too long: at most {limit} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: kept as its escape, as the log keeps them
        value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    text = unicodedata.normalize("NFC", value)
    text = "".join(c for c in text if c in "\n\t" or unicodedata.category(c) != "Cc").strip()
    if not text:
        raise BadText(f"the {what} is empty")
    if len(text) > limit:
        raise BadText(f"the {what} is too long: {len(text)} characters, at most {limit}")
    return text


def person_name(value: str) -> str:
    """Who wrote it, as the log records it (never empty)."""
    return person_text(value, "name", NAME_MAX).replace("\n", " ")
