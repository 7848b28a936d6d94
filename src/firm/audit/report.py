"""A verification's verdicts: one line per check, and the report they add up to."""

from __future__ import annotations

from dataclasses import dataclass, field

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"


@dataclass(frozen=True)
class Check:
    name: str
    verdict: str
    detail: str

    def line(self) -> str:
        return f"{self.name:<13} {self.verdict:<5} {self.detail}"


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)
    # The signed head's seq when some task of the tree had not ended there: the bundle then
    # proves a prefix of the record (an export mid-run, or a bundle cut back to an earlier
    # signed checkpoint), never the whole of it.
    open_at: int | None = None

    @property
    def holds(self) -> bool:
        """Every check passes (what the bundle shows is genuine, whole or not)."""
        return bool(self.checks) and all(c.verdict == PASS for c in self.checks)

    @property
    def verified(self) -> bool:
        """Every check passes and the tree had ended: the bundle is the whole record."""
        return self.holds and self.open_at is None

    @property
    def partial(self) -> bool:
        return self.holds and self.open_at is not None

    def partial_line(self) -> str:
        return (
            f"PARTIAL: the tree was still open at seq {self.open_at}: the bundle proves the "
            "record up to there, not how it ended"
        )

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)


def verdict(name: str, problems: list[str], passed: str) -> Check:
    """FAIL with the first five problems (and how many more), or PASS saying what held."""
    if problems:
        return Check(name, FAIL, "; ".join(problems[:5]) + _more(problems))
    return Check(name, PASS, passed)


def _more(problems: list[str]) -> str:
    return f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
