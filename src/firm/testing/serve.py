"""The scripted model server in a process of its own.

    with ServerProcess("benchmarks/teams_parallel.py:answer", 0.2) as server:
        os.environ.update(server.env())
        ...
        print(server.request_count())

A real model is remote: parsing its requests costs firm nothing. The scripted server run in
firm's own process (ModelServer) shares its interpreter lock, so each request it reads and
answers is CPU time taken from firm's sessions, in the middle of the gaps a benchmark counts
as firm's. Run here, in a child process on loopback, the server is still real HTTP, and what
a benchmark measures is firm's alone.

The child is `python -m firm.testing.serve WHERE:NAME [JSON_ARG ...]`: it imports NAME, a
factory, from a module or a .py file, calls it with the JSON arguments to get the model (a
ScriptedModel or a function of a ModelRequest), prints the server's URL as one JSON line,
and serves until its standard input closes. A line `requests` on its input is answered with
one JSON line: the requests so far (seq, agent, status, completed).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from firm.testing.server import MODEL_NAME, ModelServer, brain_options

API_KEY = "firm-testing"


def load(where: str, args: list[Any]) -> Any:
    """The model made by NAME, a factory in a module (`pkg.mod:NAME`) or a file
    (`path/to/file.py:NAME`), called with args."""
    module_name, _, name = where.rpartition(":")
    if not module_name or not name:
        raise SystemExit(f"expected MODULE:NAME or FILE.py:NAME, got {where!r}")
    if module_name.endswith(".py"):
        path = Path(module_name).resolve()
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    return getattr(module, name)(*args)


def _summary(server: ModelServer) -> list[dict[str, Any]]:
    return [
        {"seq": r.seq, "agent": r.agent, "status": r.status, "completed": r.completed}
        for r in server.requests
    ]


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        raise SystemExit("usage: python -m firm.testing.serve MODULE:NAME [JSON_ARG ...]")
    # Standard output is the parent's to read: what the model's module prints goes to
    # standard error.
    out, sys.stdout = sys.stdout, sys.stderr
    model = load(argv[0], [json.loads(a) for a in argv[1:]])
    with ModelServer(model) as server:
        print(json.dumps({"url": server.url}), file=out, flush=True)
        for line in sys.stdin:  # until the parent closes it (or goes away)
            if line.strip() == "requests":
                print(json.dumps(_summary(server)), file=out, flush=True)


class ServerProcess:
    """A scripted model server started in a child process, on 127.0.0.1; stopped (and
    waited for) on exit."""

    def __init__(self, where: str, *args: Any):
        self._argv = [sys.executable, "-m", "firm.testing.serve", where]
        self._argv += [json.dumps(a) for a in args]
        self._child: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> ServerProcess:
        child = subprocess.Popen(
            self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self._child = child
        first = self._stdout().readline()
        if not first:
            self.stop()
            raise RuntimeError(f"the model server did not start ({' '.join(self._argv)})")
        self.url = json.loads(first)["url"]
        return self

    def _stdout(self) -> IO[str]:
        assert self._child is not None and self._child.stdout is not None
        return self._child.stdout

    def requests(self) -> list[dict[str, Any]]:
        """The requests the server has received so far: seq, agent, status, completed (true
        once the server has written the whole reply, which can be just after the client
        has read it)."""
        assert self._child is not None and self._child.stdin is not None
        self._child.stdin.write("requests\n")
        self._child.stdin.flush()
        summary: list[dict[str, Any]] = json.loads(self._stdout().readline())
        return summary

    def request_count(self) -> int:
        return len(self.requests())

    def stop(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        assert child.stdin is not None and child.stdout is not None
        child.stdin.close()  # the child's signal to stop
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        child.stdout.close()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def brain_options(self, **overrides: Any) -> dict[str, Any]:
        """Options for brain="llm" that call this server, with quick retries."""
        return brain_options(self.url, **overrides)

    def env(self) -> dict[str, str]:
        """Environment variables that point firm's LLM brain at this server."""
        return {"OPENAI_BASE_URL": self.url, "OPENAI_API_KEY": API_KEY, "FIRM_MODEL": MODEL_NAME}


if __name__ == "__main__":
    main()
