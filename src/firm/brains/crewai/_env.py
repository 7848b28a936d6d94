"""CrewAI must not phone home: its telemetry and tracing are off unless the user turned them on.

Imported before crewai itself, because CrewAI reads these variables when it starts. A user who
wants CrewAI's telemetry sets CREWAI_DISABLE_TELEMETRY=false (and CREWAI_TRACING_ENABLED=true
for its tracing) in the environment; a value already set is never overridden.
"""

from __future__ import annotations

import os

OPT_OUTS = {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_TRACING_ENABLED": "false",
}


def quiet_crewai() -> None:
    for name, value in OPT_OUTS.items():
        os.environ.setdefault(name, value)


quiet_crewai()
