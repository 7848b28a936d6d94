"""Who may do what: one access token, required for every change, and for reads off loopback.

On loopback, reads need no token, but two browser tricks could still reach them from another
site: DNS rebinding (a hostile name that resolves to 127.0.0.1, seen in the Host header) and a
cross-site WebSocket (browsers do not apply CORS to WebSockets, but they do send Origin). A
read without a token is therefore served only to a loopback Host, and a WebSocket without a
token only to a page of the same origin.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from firm.errors import FirmError

LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """Whether an address to bind or a Host name is this machine only."""
    host = host.strip().strip("[]").lower()
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(host_header: str) -> str:
    """The name part of a Host header value (drops the port; keeps IPv6 brackets out)."""
    value = host_header.strip()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value[1:]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def new_token() -> str:
    return secrets.token_urlsafe(24)


OFFICE_TOKEN_HOLDER = "office token"  # who decided, when the office's own token was sent
PERSON_NAME_MAX = 64


def parse_people(text: str | None) -> dict[str, str]:
    """FIRM_TOKENS: `alice:TOKEN,bob:TOKEN` → {token: name}. Names are recorded as who
    decided an approval; a malformed entry is an error saying which."""
    people: dict[str, str] = {}
    for i, item in enumerate((text or "").split(","), start=1):
        item = item.strip()
        if not item:
            continue
        name, sep, token = item.partition(":")
        name, token = name.strip(), token.strip()
        if not sep or not name or not token or len(name) > PERSON_NAME_MAX:
            raise FirmError(
                f"FIRM_TOKENS entry {i} is not NAME:TOKEN (a name of at most "
                f"{PERSON_NAME_MAX} characters, a colon, a token)"
            )
        if token in people:
            raise FirmError(f"FIRM_TOKENS entry {i} reuses the token of {people[token]}")
        people[token] = name
    return people


def _same(a: str, b: str) -> bool:
    return secrets.compare_digest(
        a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass")
    )


@dataclass(frozen=True)
class AccessPolicy:
    token: str
    reads_need_token: bool  # bound to an address other than loopback
    # More tokens, each naming a person (FIRM_TOKENS): they may do what the office token may,
    # and their name is what the log records as who decided.
    people: dict[str, str] = field(default_factory=dict)

    @classmethod
    def for_host(
        cls, bind_host: str, token: str | None = None, people: dict[str, str] | None = None
    ) -> AccessPolicy:
        if people is None:
            people = parse_people(os.environ.get("FIRM_TOKENS"))
        return cls(
            token=token or new_token(), reads_need_token=not is_loopback(bind_host), people=people
        )

    def who(self, presented: str | None) -> str | None:
        """The name a token stands for (None: not a token of this office)."""
        if presented is None:
            return None
        named = None
        for token, name in self.people.items():
            if _same(presented, token):
                named = name
        if named is not None:
            return named
        return OFFICE_TOKEN_HOLDER if _same(presented, self.token) else None

    def token_ok(self, presented: str | None) -> bool:
        return self.who(presented) is not None

    def read_refusal(self, presented: str | None, host_header: str | None) -> str | None:
        """Why a read must be refused (None: allowed)."""
        if self.token_ok(presented):
            return None
        if presented is not None and self.reads_need_token:
            return "the access token is wrong"
        # On loopback a wrong token (a tab kept from before a restart) reads as no token: the
        # tab keeps watching, and is asked for the new token only when it tries to act.
        if self.reads_need_token:
            return "this office is open beyond this machine: send the access token"
        if not host_header or not is_loopback(host_name(host_header)):
            return (
                f"the Host {host_header!r} is not a loopback name; open the office at "
                "127.0.0.1 or localhost, or send the access token"
            )
        return None

    def live_refusal(
        self, presented: str | None, host_header: str | None, origin: str | None
    ) -> str | None:
        """Why a WebSocket must be refused (None: allowed)."""
        refusal = self.read_refusal(presented, host_header)
        if refusal is not None or self.token_ok(presented):
            return refusal
        if origin and urlsplit(origin).netloc.lower() != (host_header or "").lower():
            return f"a page from {origin} cannot watch this office without the access token"
        return None

    def write_refusal(self, presented: str | None) -> str | None:
        if self.token_ok(presented):
            return None
        if presented is None:
            return (
                "this needs the access token `firm serve` printed "
                "(send it as 'Authorization: Bearer TOKEN')"
            )
        return "the access token is wrong"
