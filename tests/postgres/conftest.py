"""The scale-out tests: every fixture they use (pg_server, pg_url, store_url, open_any, store
on both backends) comes from tests/support/stores.py through the root conftest."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
