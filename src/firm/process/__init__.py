"""Deprecated: `firm.process` is now `firm.teams`; this alias is kept for one release.

`import firm.process` and `from firm.process.<module> import ...` keep working and give the
same module objects as `firm.teams` (so isinstance checks and registrations agree), with a
DeprecationWarning.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

from firm.teams import *  # noqa: F403 (the old path re-exports the new one)
from firm.teams import __all__ as __all__

_OLD = "firm.process"
_NEW = "firm.teams"

warnings.warn(
    f"{_OLD} is renamed {_NEW}; import from {_NEW} (the old path goes in the next release)",
    DeprecationWarning,
    stacklevel=2,
)


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolve `firm.process.x` to the already-importable `firm.teams.x`."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(_OLD + "."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        # The import system returns whatever sys.modules holds under the name once this
        # returns: put the real module there, so both names give one object and the real
        # module's own __spec__ stays untouched.
        real = importlib.import_module(_NEW + module.__name__[len(_OLD) :])
        sys.modules[module.__name__] = real


if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
    sys.meta_path.insert(0, _Alias())
