"""The office: an HTTP and WebSocket API over the engine and the store, and the page that
shows the company at work. Imported only by `firm serve` (and programs that embed it), so the
rest of firm does not pay for FastAPI.

    from firm.server import Office, OfficeServer, AccessPolicy

    policy = AccessPolicy.for_host("127.0.0.1")
    office = Office("acme/company.yaml", db=".firm/firm.db", policy=policy)
    OfficeServer(office, "127.0.0.1", 8000).run()
"""

from firm.server.access import AccessPolicy, is_loopback
from firm.server.app import create_app
from firm.server.office import Office
from firm.server.serving import OfficeServer

__all__ = ["AccessPolicy", "Office", "OfficeServer", "create_app", "is_loopback"]
