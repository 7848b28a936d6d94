"""The company workspace: the only part of the file system agents can touch (invariant 10).

Every path is checked before use: no absolute paths, no `..` that climbs out, no symlink on
the way that points outside, no device files or FIFOs, no NUL bytes, bounded names, sizes and
file counts. Writes go to a temporary file in the same folder and are renamed into place, so
a crash never leaves half a file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from firm.errors import WorkspaceError


@dataclass(frozen=True)
class Limits:
    max_write_bytes: int = 5 * 1024 * 1024
    max_read_bytes: int = 1024 * 1024
    max_files: int = 100_000
    max_name_length: int = 255
    max_path_length: int = 1024
    max_depth: int = 32
    max_list_entries: int = 2000


class Workspace:
    def __init__(self, root: str | Path, limits: Limits | None = None):
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.limits = limits or Limits()
        self._count_lock = threading.Lock()
        self._file_count: int | None = None

    # --- path checks ---------------------------------------------------------------------

    def relative(self, path: str) -> str:
        """Normalise a workspace path and check its shape (no file system access)."""
        if not isinstance(path, str):
            raise WorkspaceError("a path must be a string")
        if "\x00" in path:
            raise WorkspaceError("the path contains a NUL byte")
        p = path.replace("\\", "/").strip()
        if not p:
            raise WorkspaceError("the path is empty")
        if p.startswith("/") or (len(p) > 1 and p[1] == ":") or p.startswith("~"):
            raise WorkspaceError(f"{path!r} is absolute; use a path relative to the workspace")
        if len(p) > self.limits.max_path_length:
            raise WorkspaceError(
                f"the path is {len(p)} characters long; the limit is {self.limits.max_path_length}"
            )
        norm = posixpath.normpath(p)
        if norm == ".." or norm.startswith("../"):
            raise WorkspaceError(f"{path!r} leaves the workspace")
        parts = [] if norm == "." else norm.split("/")
        if len(parts) > self.limits.max_depth:
            raise WorkspaceError(
                f"{path!r} is nested {len(parts)} deep; the limit is {self.limits.max_depth}"
            )
        for part in parts:
            if len(part.encode()) > self.limits.max_name_length:
                raise WorkspaceError(
                    f"a name in {path!r} is longer than {self.limits.max_name_length} bytes"
                )
        return norm

    def resolve(self, path: str) -> Path:
        """The real path for a workspace path, refusing symlinks that lead outside."""
        norm = self.relative(path)
        current = self.root
        if norm == ".":
            return current
        linked = False
        for part in norm.split("/"):
            current = current / part
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                continue  # the rest does not exist yet (a write will create it)
            if stat.S_ISLNK(st.st_mode):
                target = _real(current, path)
                if not target.is_relative_to(self.root):
                    raise WorkspaceError(
                        f"{path!r} goes through a symlink that points outside the workspace"
                    )
                current = target
                linked = True
        # With no symlink on the way, root/norm is already the real path.
        final = _real(current, path) if linked else current
        if not final.is_relative_to(self.root):
            raise WorkspaceError(f"{path!r} leaves the workspace")
        return final

    # --- operations ----------------------------------------------------------------------

    def read(self, path: str, offset: int = 0, length: int | None = None) -> str:
        target = self.resolve(path)
        if offset < 0 or (length is not None and length < 0):
            raise WorkspaceError("offset and length must not be negative")
        cap = self.limits.max_read_bytes
        if length is not None and length > cap:
            raise WorkspaceError(
                f"length {length} is over the read limit of {cap} bytes; read in parts"
            )
        # Look before opening: opening a device can have effects of its own (a tape rewinds).
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            raise WorkspaceError(f"{path!r} does not exist") from None
        if stat.S_ISDIR(st.st_mode):
            raise WorkspaceError(f"{path!r} is a folder; use files.list")
        if not stat.S_ISREG(st.st_mode):
            raise WorkspaceError(f"{path!r} is not a regular file (device, FIFO or socket)")
        try:
            fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            raise WorkspaceError(f"{path!r} does not exist") from None
        except IsADirectoryError:
            raise WorkspaceError(f"{path!r} is a folder; use files.list") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise WorkspaceError(f"{path!r} is a symlink") from None
            raise WorkspaceError(f"cannot read {path!r}: {exc.strerror}") from None
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise WorkspaceError(f"{path!r} is a folder; use files.list")
            if not stat.S_ISREG(st.st_mode):
                raise WorkspaceError(f"{path!r} is not a regular file (device, FIFO or socket)")
            rest = max(0, st.st_size - offset)
            if length is None and rest > cap:
                raise WorkspaceError(
                    f"{path!r} is {st.st_size} bytes, over the read limit of {cap}; read it in "
                    f"parts with offset and length (at most {cap} bytes each)"
                )
            want = rest if length is None else min(length, rest)
            os.lseek(fd, offset, os.SEEK_SET)
            data = os.read(fd, max(want, 0))
        finally:
            os.close(fd)
        return data.decode("utf-8", errors="replace")

    def write(self, path: str, content: str | bytes) -> int:
        data = content if isinstance(content, bytes) else content.encode("utf-8")
        if len(data) > self.limits.max_write_bytes:
            raise WorkspaceError(
                f"the content is {len(data)} bytes, over the write limit of "
                f"{self.limits.max_write_bytes}"
            )
        target = self.resolve(path)
        if target == self.root:
            raise WorkspaceError("cannot write to the workspace folder itself; name a file")
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise WorkspaceError(f"{path!r} exists and is not a regular file")
        if st is None:
            self._reserve_file(path)
        try:
            self._write_atomically(path, target, data)
        except BaseException:
            if st is None:
                self._release_file()
            raise
        return len(data)

    def _write_atomically(self, path: str, target: Path, data: bytes) -> None:
        """A temporary file beside the target, flushed to disk, renamed over it: a reader or a
        crash sees the old file or the new one, never half of one."""
        parent = target.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise WorkspaceError(f"a parent of {path!r} is a file, not a folder") from None
        if not _real(parent, path).is_relative_to(self.root):
            raise WorkspaceError(f"{path!r} leaves the workspace")
        fd, tmp = tempfile.mkstemp(prefix=".firm-", suffix=".tmp", dir=parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
                os.fchmod(f.fileno(), 0o644)  # mkstemp's 0600 would hide deliverables
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def list(self, path: str = ".") -> list[str]:
        """Files under a folder, as workspace paths, folders first level marked with '/'."""
        target = self.resolve(path)
        if not target.exists():
            raise WorkspaceError(f"{path!r} does not exist")
        if not target.is_dir():
            raise WorkspaceError(f"{path!r} is a file; use files.read")
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(target):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".firm-"))
            for name in sorted(filenames):
                if name.startswith(".firm-") and name.endswith(".tmp"):
                    continue
                full = Path(dirpath) / name
                shown = full.relative_to(self.root).as_posix()
                if full.is_symlink():
                    try:
                        real = _real(full, shown)
                    except WorkspaceError:
                        # One bad link must not hide the rest: it is listed, saying why it
                        # cannot be read.
                        out.append(f"{shown} (unreadable: a symlink loop)")
                        continue
                    if not real.is_relative_to(self.root):
                        continue  # a way out is not a file of the workspace
                out.append(shown)
                if len(out) >= self.limits.max_list_entries:
                    return out
        return out

    def exists(self, path: str) -> bool:
        try:
            return self.resolve(path).is_file()
        except WorkspaceError:
            return False

    def _reserve_file(self, path: str) -> None:
        with self._count_lock:
            if self._file_count is None:
                self._file_count = sum(len(f) for _, _, f in os.walk(self.root))
            if self._file_count >= self.limits.max_files:
                raise WorkspaceError(
                    f"the workspace holds {self._file_count} files, the limit; "
                    f"cannot create {path!r}"
                )
            self._file_count += 1

    def _release_file(self) -> None:
        with self._count_lock:
            if self._file_count:
                self._file_count -= 1


def _real(path: Path, shown: str) -> Path:
    """`path` with every symlink followed; a loop of links is the caller's clear error, never
    the RuntimeError (or ELOOP) resolving one raises."""
    try:
        return path.resolve()
    except RuntimeError:
        raise WorkspaceError(f"{shown!r} goes through a symlink loop") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise WorkspaceError(f"{shown!r} goes through a symlink loop") from None
        raise
