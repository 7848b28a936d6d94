"""A throwaway PostgreSQL cluster for the tests: installed from the system packages where
missing, initialised in a temporary folder, listening on a free port on 127.0.0.1 only.

Set FIRM_TEST_PG_URL=postgresql://user@host:port/db to use a server you run instead (its user
must be allowed to CREATE DATABASE).
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

SERVER_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "max_connections": "400",
    # Durability is not what these tests are about; speed is what the suite needs.
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "64MB",
    "deadlock_timeout": "200ms",
    "log_min_messages": "warning",
}


class PostgresUnavailable(RuntimeError):
    pass


def find_bindir() -> Path | None:
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if candidates:
        return Path(candidates[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def install_postgres() -> None:
    """apt-get install postgresql (Debian/Ubuntu, as root). Updates the lists only if needed."""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise PostgresUnavailable(
            "PostgreSQL is not installed and cannot be installed here (needs root and apt-get); "
            "install the postgresql package or set FIRM_TEST_PG_URL"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql"]
    if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, check=False)
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise PostgresUnavailable(f"apt-get install postgresql failed:\n{done.stderr[-2000:]}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgCluster:
    """initdb + pg_ctl start; as root, the server runs as the unprivileged user `nobody`."""

    def __init__(self) -> None:
        bindir = find_bindir()
        if bindir is None:
            install_postgres()
            bindir = find_bindir()
        if bindir is None:
            raise PostgresUnavailable("PostgreSQL was installed but initdb is nowhere to be found")
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="firm-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sockets"
        self.port = free_port()
        self.user = "firm"
        self._as_user: dict[str, object] = {}
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            nobody = pwd.getpwnam("nobody")
            self._as_user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
            os.chmod(self.root, 0o755)
            os.chown(self.root, nobody.pw_uid, nobody.pw_gid)
        self.sockets.mkdir()
        if self._as_user:
            os.chown(self.sockets, self._as_user["user"], self._as_user["group"])  # type: ignore[arg-type]
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            self.user,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        for attempt in range(3):
            try:
                self._start()
                break
            except PostgresUnavailable as exc:
                # The port was free when chosen, but another process (a parallel test
                # worker's cluster, a server under test) may have bound it since.
                if "already in use" not in str(exc) or attempt == 2:
                    raise
                self.port = free_port()
        atexit.register(self.stop)
        self.url = f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

    def _start(self) -> None:
        options = " ".join(f"-c {k}={v}" for k, v in SERVER_SETTINGS.items())
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-w",
            "-t",
            "180",  # only bounds a hang: a loaded machine starts a cluster slowly
            "-o",
            f"-p {self.port} -k {self.sockets} {options}",
            "start",
        )

    def _run(self, tool: str, *args: str) -> None:
        env = {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C", "HOME": str(self.root)}
        done = subprocess.run(
            [str(self.bindir / tool), *args],
            capture_output=True,
            text=True,
            cwd=self.root,
            env=env,
            **self._as_user,  # type: ignore[arg-type]
        )
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise PostgresUnavailable(f"{tool} failed:\n{done.stdout}\n{done.stderr}\n{tail}")

    def stop(self) -> None:
        if self.data.exists():
            with contextlib.suppress(PostgresUnavailable):
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


class PgServer:
    """A server to make test databases on: our own cluster, or FIRM_TEST_PG_URL's."""

    def __init__(self) -> None:
        external = os.environ.get("FIRM_TEST_PG_URL")
        self.cluster = None if external else PgCluster()
        self.admin_url = external or self.cluster.url  # type: ignore[union-attr]
        self._template: str | None = None

    def _admin(self):  # type: ignore[no-untyped-def]
        import psycopg

        deadline = time.monotonic() + 30
        while True:
            try:
                return psycopg.connect(self.admin_url, autocommit=True)
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def url_for(self, name: str) -> str:
        head, _, _ = self.admin_url.rpartition("/")
        return f"{head}/{name}"

    def template(self) -> str:
        """A database migrated to head once; each test database is a copy of it."""
        if self._template is None:
            from firm.store import SqlStore

            name = f"firm_tpl_{uuid.uuid4().hex[:8]}"
            with self._admin() as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            store = SqlStore(self.url_for(name), migrate=True)
            store.close()
            self._template = name
        return self._template

    def create_database(self, migrated: bool = True) -> str:
        name = f"firm_t_{uuid.uuid4().hex[:10]}"
        with self._admin() as conn:
            if migrated:
                conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template()}"')
            else:
                conn.execute(f'CREATE DATABASE "{name}"')
        return self.url_for(name)

    def drop_database(self, url: str) -> None:
        name = url.rpartition("/")[2]
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def terminate(self, application_name_like: str) -> int:
        """pg_terminate_backend every connection whose application_name matches; how many."""
        with self._admin() as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name LIKE %s AND pid <> pg_backend_pid()",
                (application_name_like,),
            ).fetchall()
        return sum(1 for (ok,) in rows if ok)

    def waiting_for_locks(self, database_url: str) -> int:
        """How many backends of a database wait for a row lock (to order contended writes)."""
        name = database_url.rpartition("/")[2]
        with self._admin() as conn:
            return int(
                conn.execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = %s AND wait_event_type = 'Lock'",
                    (name,),
                ).fetchone()[0]
            )

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
