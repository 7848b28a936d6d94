"""Running the office on a socket: in the foreground (`firm serve`) or in a thread (tests)."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time

import uvicorn

from firm.errors import FirmError
from firm.server.access import is_loopback
from firm.server.app import create_app
from firm.server.office import Office
from firm.server.timeouts import IDLE_TIMEOUT, TimedH11Protocol


def listens_everywhere(host: str) -> bool:
    """Whether binding here listens on every address of the machine (0.0.0.0, ::, or "")."""
    try:
        return not host or ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def reachable_host(host: str) -> str:
    """A name others can open for an address to bind: 0.0.0.0 is no address to browse to, so
    a wildcard becomes this machine's name (or loopback, when the machine has none to give)."""
    if not listens_everywhere(host):
        return host
    name = socket.gethostname()
    return name if name and not is_loopback(name) else local_host(host)


def local_host(host: str) -> str:
    """An address of this machine the office answers on, for a browser on this machine."""
    if not listens_everywhere(host):
        return host
    return "::1" if ":" in host else "127.0.0.1"


def http_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def bind(host: str, port: int) -> socket.socket:
    """Listen on host:port (port 0: any free port), or say clearly why not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise FirmError(f"cannot listen on {host!r}: {exc.strerror}") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        hint = " (choose another with --port)" if port else ""
        raise FirmError(f"cannot listen on {host}:{port}: {exc.strerror}{hint}") from None
    sock.set_inheritable(True)
    return sock


class OfficeServer:
    """One office served over HTTP and WebSocket by uvicorn."""

    def __init__(self, office: Office, host: str = "127.0.0.1", port: int = 8000):
        self.office = office
        self.host = host
        self.socket = bind(host, port)
        self.port: int = self.socket.getsockname()[1]
        config = uvicorn.Config(
            create_app(office),
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=5,
            ws_ping_interval=20,
            ws_ping_timeout=20,
            http=TimedH11Protocol,
            timeout_keep_alive=IDLE_TIMEOUT,
            h11_max_incomplete_event_size=64 * 1024,
        )
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Where to open the office: this machine's name when it listens on every address."""
        return http_url(reachable_host(self.host), self.port)

    @property
    def local_url(self) -> str:
        """Where to open it from this machine."""
        return http_url(local_host(self.host), self.port)

    def run(self) -> None:
        """Serve until interrupted (Ctrl-C or SIGTERM)."""
        self.server.run(sockets=[self.socket])

    def start(self, timeout: float = 30.0) -> OfficeServer:
        """Serve from a background thread; returns once the office is open."""
        self._thread = threading.Thread(target=self.run, name="firm-office", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive():
                raise FirmError("the office failed to start")
            if time.monotonic() > deadline:
                raise FirmError(f"the office did not start within {timeout}s")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self.socket.close()
