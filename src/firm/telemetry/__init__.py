"""Traces of the company's work for the tracing tools operators already run (OpenTelemetry).

Off and free unless the standard variables ask for it (`OTEL_EXPORTER_OTLP_ENDPOINT`,
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_TRACES_EXPORTER`); then the `otel` extra
(`pip install 'firm[otel]'`) exports one trace per goal. OpenTelemetry is imported only then.

- spans.py   the spans a process's committed events make (pure data, deterministic ids)
- export.py  those spans handed to an OpenTelemetry exporter, on a thread of their own
"""

from __future__ import annotations

import logging
import os
from typing import Any

log = logging.getLogger(__name__)

_ASKING = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
)


def tracing_requested(environ: Any = None) -> bool:
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(env.get(name, "").strip() for name in _ASKING)


def start_tracing(store: Any) -> Any:
    """A running exporter of this process's spans, or None when tracing is off."""
    if not tracing_requested():
        return None
    try:
        from firm.telemetry.export import Tracing
    except ImportError as exc:
        log.warning("tracing is asked for, but needs the extra: pip install 'firm[otel]' (%s)", exc)
        return None
    return Tracing.from_env(store)


__all__ = ["start_tracing", "tracing_requested"]
