"""What goes wrong with a team: a mistake in its definition, or a run that did not finish."""

from __future__ import annotations

from typing import Any

from firm.errors import FirmError


class TeamError(FirmError):
    """A team is defined wrongly; the message says what and where."""


class TeamFailed(FirmError):
    """A team run ended without every task done. `result` holds everything it produced, as
    `start(return_dict=True)` would have returned it; `reason` says why it ended."""

    def __init__(self, result: dict[str, Any]):
        self.result = result
        self.reason = result.get("error") or result.get("status")
        super().__init__(f"the team run {result.get('run_id')} {result['status']}: {self.reason}")
