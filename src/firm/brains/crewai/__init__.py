"""The crewai brain: every work session a one-agent, one-task CrewAI crew (needs firm[crewai]).

Importing this package imports crewai; `import firm` never does.
"""

from firm.brains.crewai import _env  # noqa: F401  (telemetry off before crewai loads)
from firm.brains.crewai.brain import CrewAIBrain

__all__ = ["CrewAIBrain"]
