"""What firm's tests share: the both-backend store fixtures (stores.py), the scripted model
server fixtures (models.py), running the real `firm` command (firm_cli), a server started on
a free port (ports.listening) and reading the log (events_of). A brain of one function per
agent is firm.testing.FunctionBrain, public."""

from tests.support.cli import SUBPROCESS_GUARD, firm_cli
from tests.support.events import events_of

__all__ = ["SUBPROCESS_GUARD", "events_of", "firm_cli"]
