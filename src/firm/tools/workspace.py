"""The company workspace: the only part of the file system agents can touch (invariant 10).

Every path is checked before use: no absolute paths, no `..` that climbs out, no symlink on
the way that points outside, no device files or FIFOs, no NUL bytes, bounded names, sizes and
file counts. Writes go to a temporary file in the same folder and are renamed into place, so
a crash never leaves half a file; a new file made ready beforehand (make_folder, spares.py)
is an anonymous file linked into place once filled, which a crash leaves nothing of.

Durability follows the store's by default: SQLite in WAL with synchronous=NORMAL does not
fsync each commit, so a commit survives the process being killed (the kernel's page cache
keeps it) but not the machine losing power. A write here is the same: a kill -9 at any point
leaves the old file or the new one, and the file is not flushed to disk. `sync=True` (or
FIRM_WORKSPACE_SYNC=1 in the environment) flushes the file and its folder before the write
returns, for a store that does fsync each commit (SQLite with synchronous=FULL, a PostgreSQL
with fsync on) and a deliverable that must outlive a power cut with it.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import posixpath
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from firm.errors import WorkspaceError
from firm.tools.spares import Spares, link


@dataclass(frozen=True)
class Limits:
    max_write_bytes: int = 5 * 1024 * 1024
    max_read_bytes: int = 1024 * 1024
    max_files: int = 100_000
    max_name_length: int = 255
    max_path_length: int = 1024
    max_depth: int = 32
    max_list_entries: int = 2000


SYNC_ENV = "FIRM_WORKSPACE_SYNC"
SHAPES_KEPT = 4096
# Temporary names: unique within the process by the counter, across processes by the pid;
# O_EXCL refuses a name a crashed process left behind, and the next number is tried.
_TMP_SEQ = itertools.count()
# The pid, asked of the kernel once per process rather than at every write (a fork's child
# asks again).
_PID = [os.getpid()]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid()))
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def sync_from_env() -> bool:
    return os.environ.get(SYNC_ENV, "").strip().lower() in ("1", "true", "yes", "on")


class Workspace:
    def __init__(self, root: str | Path, limits: Limits | None = None, sync: bool | None = None):
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self._root = str(self.root)
        self._prefix = self._root.rstrip("/") + "/"
        self.limits = limits or Limits()
        # Flush each write (file and folder) to disk before it returns; see the module's note.
        self.sync = sync_from_env() if sync is None else sync
        self._count_lock = threading.Lock()
        self._file_count: int | None = None
        # Paths already found well-shaped, with their normal form: a written file's path is
        # checked again by files.write's reply and by complete_task. Shape only, no file
        # system state, so an answer never goes stale.
        self._shapes: dict[str, str] = {}
        # New files' inodes made ready by make_folder (tools/spares.py).
        self._spares = Spares()

    # --- path checks ---------------------------------------------------------------------

    def relative(self, path: str) -> str:
        """Normalise a workspace path and check its shape (no file system access)."""
        if type(path) is not str:
            return self._shape(path)  # refused, or a str subclass: checked every time
        known = self._shapes.get(path)
        if known is None:
            known = self._shape(path)
            if len(self._shapes) >= SHAPES_KEPT:
                self._shapes.clear()
            self._shapes[path] = known
        return known

    def _shape(self, path: str) -> str:
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
        for part in norm.split("/"):
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
            except NotADirectoryError:
                raise WorkspaceError(f"a parent of {path!r} is a file, not a folder") from None
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
        plain = self._plain(path)
        missing: int | None = None  # folders to make; None: not known
        if plain is not None:
            target, st, missing = plain
        else:
            resolved = self.resolve(path)
            if resolved == self.root:
                raise WorkspaceError("cannot write to the workspace folder itself; name a file")
            target = str(resolved)
            try:
                st = os.lstat(target)
            except FileNotFoundError:
                st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise WorkspaceError(f"{path!r} exists and is not a regular file")
        if st is None:
            self._reserve_file(path)
        try:
            self._write_atomically(path, target, data, missing, new=st is None)
        except BaseException:
            if st is None:
                self._release_file()
            raise
        return len(data)

    def make_folder(self, path: str, files: int = 0) -> None:
        """Make a folder of the workspace, with any parents it lacks, checked as a write's path
        is; one that is there already is left as it is. For a brain that knows where its
        files will go before it writes them (brains/simulation.py: a manager's team folder);
        `files` new files are made ready there too, for the next writes of new files to fill
        (tools/spares.py)."""
        plain = self._plain(path)
        missing: int | None = None
        if plain is not None:
            target, st, below = plain
            missing = below + 1  # the walk counts the folders below the missing name
        else:
            resolved = self.resolve(path)
            if resolved == self.root:
                return
            target = str(resolved)
            try:
                st = os.lstat(target)
            except FileNotFoundError:
                st = None
        if st is not None:
            if not stat.S_ISDIR(st.st_mode):
                raise WorkspaceError(f"{path!r} exists and is not a folder")
        else:
            self._make_folders(target, path, missing)
            if not self._inside(target, path):
                raise WorkspaceError(f"{path!r} leaves the workspace")
        self._spares.make(target, files)
        if files > 0:
            # The first new file's write counts the workspace's files (a walk of it, under
            # the count's lock): counted now, ahead of the writes these files are made for.
            with self._count_lock:
                self._count_files()

    def _plain(self, path: str) -> tuple[str, os.stat_result | None, int] | None:
        """The common case, in strings and one lstat a level: a path under the root with no
        symlink on the way. Returns the target, its lstat (None: no file yet, its folders
        perhaps not either) and how many of its folders are missing; or None for anything
        else (a symlink, a file where a folder should be, the root itself), which takes
        `resolve`'s general path."""
        norm = self.relative(path)
        if norm == ".":
            return None
        current = self._root.rstrip("/")
        st: os.stat_result | None = None
        parts = norm.split("/")
        for i, part in enumerate(parts):
            current = f"{current}/{part}"
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                # Nothing exists below a missing name: the file is new (its folders are made
                # and checked again when it is written).
                return f"{self._prefix}{norm}", None, len(parts) - 1 - i
            except NotADirectoryError:
                return None
            if stat.S_ISLNK(st.st_mode):
                return None
        return current, st, 0

    def _inside(self, folder: str, path: str) -> bool:
        """Whether a folder's real path is inside the workspace: checked again after the
        folders are made, since another writer may have swapped one for a symlink since the
        path was resolved. A walk of lstats from the root; a symlink met on it is followed."""
        if folder == self._root:
            return True
        if not folder.startswith(self._prefix):
            return _real(Path(folder), path).is_relative_to(self.root)
        current = self._root.rstrip("/")
        for part in folder[len(self._prefix) :].split("/"):
            current = f"{current}/{part}"
            if stat.S_ISLNK(os.lstat(current).st_mode):
                return _real(Path(folder), path).is_relative_to(self.root)
        return True

    def _write_atomically(
        self, path: str, target: str, data: bytes, missing: int | None = None, new: bool = False
    ) -> None:
        """A temporary file beside the target, renamed over it: a reader or a killed process
        sees the old file or the new one, never half of one (the rename is atomic, and the
        data is in the page cache before it). With `sync`, the file is flushed to disk before
        the rename and the folder after it, so a power cut cannot undo or tear it either."""
        parent = os.path.dirname(target)
        made = self._make_folders(parent, path, missing)
        # A folder this write just made in the root itself is inside by its making (mkdir
        # does not follow a link in its last name, and the root is the root); any other is
        # looked at again.
        if not (made and os.path.dirname(parent) == self._root) and not self._inside(parent, path):
            raise WorkspaceError(f"{path!r} leaves the workspace")
        if new and self._filled(target, data):
            return
        try:
            fd, tmp = _temporary(parent)
        except (FileNotFoundError, NotADirectoryError):
            if missing is None:
                raise
            # The folder changed since the path was walked: made (or refused) the general
            # way, and checked again.
            self._make_folders(parent, path, None)
            if not self._inside(parent, path):
                raise WorkspaceError(f"{path!r} leaves the workspace") from None
            fd, tmp = _temporary(parent)
        try:
            try:
                _fill(fd, data, self.sync)
            finally:
                os.close(fd)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        if self.sync:
            _sync_folder(parent)

    def _filled(self, target: str, data: bytes) -> bool:
        """A new file written into a file made ready (make_folder) and linked into place: the
        name appears with the whole content, as a rename would give it. False when none is
        ready or the name cannot be had (taken since): the caller writes the usual way."""
        fd = self._spares.take()
        if fd is None:
            return False
        try:
            _fill(fd, data, self.sync)
            linked = link(fd, target)
        finally:
            os.close(fd)
        if linked and self.sync:
            _sync_folder(os.path.dirname(target))
        return linked

    def _make_folders(self, parent: str, path: str, missing: int | None) -> bool:
        """The target's folders, made. `missing` is what the walk of the path found absent:
        none (nothing to make), the last folder alone (one mkdir), else unknown or more.
        True when that one mkdir made the target's folder."""
        if missing == 0:
            return False
        try:
            if missing == 1:
                try:
                    os.mkdir(parent)
                    return True
                except (FileExistsError, FileNotFoundError, NotADirectoryError):
                    pass  # changed since the walk (another writer): settled the general way
            os.makedirs(parent, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise WorkspaceError(f"a parent of {path!r} is a file, not a folder") from None
        return False

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
            count = self._count_files()
            if count >= self.limits.max_files:
                raise WorkspaceError(
                    f"the workspace holds {count} files, the limit; cannot create {path!r}"
                )
            self._file_count = count + 1

    def _count_files(self) -> int:
        """The workspace's files, counted at the first need (the count's lock held); each new
        file adds one after that."""
        if self._file_count is None:
            self._file_count = sum(len(f) for _, _, f in os.walk(self.root))
        return self._file_count

    def _release_file(self) -> None:
        with self._count_lock:
            if self._file_count:
                self._file_count -= 1


def _temporary(folder: str) -> tuple[int, str]:
    while True:
        tmp = f"{folder}/.firm-{_PID[0]}-{next(_TMP_SEQ)}.tmp"
        try:
            return os.open(tmp, _TMP_FLAGS, 0o644), tmp
        except FileExistsError:
            continue


def _fill(fd: int, data: bytes, sync: bool) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fchmod(fd, 0o644)  # what umask left may hide a deliverable from its readers
    if sync:
        os.fsync(fd)


def _sync_folder(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
