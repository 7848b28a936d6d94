"""New files made ready before their content is known: anonymous files (O_TMPFILE) opened in
the workspace, each given its name by the write that fills it.

Making a file is the dear part of writing one on this machine's disk: ext4 looks for a free
inode, and on a file system without a journal it steps past every inode freed in the last
moments, reading each one's table entry (perf: `recently_deleted`, `find_inode_bit`). In the
makespan's burst that search ran 25 times one after another, once for each leaf's
deliverable (~0.1-0.2 ms of kernel time each under load). A brain that knows its next files
are coming (the simulation brain's manager, as it hands out the work) has their inodes made
while its reports think; a write then only fills one and links it into place.

The link makes the name appear with the whole content, as the rename of a temporary file
does, and a process killed before it leaves nothing behind: an anonymous file is freed with
its last descriptor. Where anonymous files or /proc are missing, nothing is made ready and
writes go the usual way.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref

# Files held ready at most, per workspace: each is an open descriptor until a write takes it.
MOST = 32
_TMPFILE = getattr(os, "O_TMPFILE", 0)
_FLAGS = _TMPFILE | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)
_FDS = "/proc/self/fd"


class Spares:
    """Anonymous files opened ahead of the writes that will fill them."""

    def __init__(self) -> None:
        self._fds: list[int] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._usable = bool(_TMPFILE) and os.path.isdir(_FDS)
        # What no write took is closed with the workspace (the files are then freed).
        weakref.finalize(self, _close_all, self._fds)

    def make(self, folder: str, count: int) -> None:
        """Open up to `count` anonymous files in `folder`, within MOST held."""
        if not self._usable or count <= 0:
            return
        with self._lock:
            want = min(count, MOST - len(self._fds))
        made: list[int] = []
        for _ in range(want):
            try:
                made.append(os.open(folder, _FLAGS, 0o644))
            except OSError:
                break  # a file system without them, or no room: writes go the usual way
        with self._lock:
            if self._pid == os.getpid():
                # Another make may have filled the room meanwhile: MOST holds exactly.
                room = max(0, MOST - len(self._fds))
                self._fds.extend(made[:room])
                del made[:room]
        _close_all(made)

    def take(self) -> int | None:
        """An anonymous file to fill, or None. A forked child never takes its parent's: both
        would write into the same file."""
        with self._lock:
            if self._pid != os.getpid():
                _close_all(self._fds)
                self._pid = os.getpid()
            return self._fds.pop() if self._fds else None


def link(fd: int, target: str) -> bool:
    """Give a filled anonymous file the name `target`; False if it cannot have it (the name
    is taken, another file system): the caller closes it and writes the usual way."""
    try:
        # linkat with AT_SYMLINK_FOLLOW on the descriptor's /proc entry (the way an
        # unprivileged process names an anonymous file); src_dir_fd only selects linkat, as
        # the source path is absolute.
        os.link(f"{_FDS}/{fd}", target, src_dir_fd=fd, follow_symlinks=True)
    except OSError:
        return False
    return True


def _close_all(fds: list[int]) -> None:
    while fds:
        with contextlib.suppress(OSError):
            os.close(fds.pop())
