"""Every code example in README.md and docs/*.md runs as written.

Each Markdown file gets one test that works through its blocks in order, in a fresh folder, so a
later block may use what an earlier one made (``firm init acme`` before ``firm run
acme/company.yaml``):

- ``sh`` blocks run in bash (``set -e``) with the real ``firm`` command on the PATH;
- ``python`` blocks run in one namespace per file; a ``test_*`` function a block defines is called
  as pytest would call it (with ``tmp_path``); a block whose first line is ``# name.py`` is written
  to that file instead (a module the other examples import);
- ``yaml`` blocks are parsed; an org chart (``company:`` and ``agents:``) is loaded as one; a block
  whose first line is ``# name.yaml`` is written to that file for later blocks;
- ``json`` blocks are parsed; ``text`` and ``console`` blocks are shown output and not run.

Where a block needs a model, ``OPENAI_BASE_URL`` points at a scripted chat-completions server on
loopback (``firm.testing``'s autopilot). A block that is deliberately not run is marked with
``<!-- not-run: why -->`` on the line before it; a fence without a language fails.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from firm import load_org
from firm.testing import ModelServer, ScriptedModel
from tests.docs.markdown_blocks import ROOT, SHOWN, Block, blocks

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
KNOWN = {"sh", "python", "yaml", "json"}
SH_TIMEOUT = 240
_FILE_HEADER = re.compile(r"^#\s*(?P<name>[\w./-]+\.(?P<ext>ya?ml|py))\b")


class ExampleFailed(AssertionError):
    pass


def _fail(block: Block, what: str, detail: str = "") -> None:
    shown = textwrap.indent(block.body.rstrip(), "    | ")
    message = f"{block.where}: {what}\n{shown}"
    if detail:
        message += "\n" + textwrap.indent(detail.rstrip()[-4000:], "    ")
    raise ExampleFailed(message)


def _header_file(block: Block) -> str | None:
    first = block.body.lstrip().splitlines()[0] if block.body.strip() else ""
    m = _FILE_HEADER.match(first)
    return m["name"] if m else None


def _run_sh(block: Block, work: Path, env: dict[str, str]) -> None:
    script = "set -e -o pipefail\n" + block.body
    try:
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=SH_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        _fail(block, f"still running after {SH_TIMEOUT} s", str(exc.stdout or ""))
        return
    if done.returncode != 0:
        _fail(
            block,
            f"exit status {done.returncode}",
            f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}",
        )


def _run_python(block: Block, work: Path, namespace: dict, tmp_path_factory) -> None:
    name = _header_file(block)
    try:
        code = compile(block.body, block.where, "exec")
    except SyntaxError as exc:
        _fail(block, f"does not compile: {exc}")
    if name:
        target = work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.body, encoding="utf-8")
        return
    before = set(namespace)
    try:
        exec(code, namespace)
        for key, value in list(namespace.items()):
            if key in before or not key.startswith("test_") or not callable(value):
                continue
            params = inspect.signature(value).parameters
            kwargs = {}
            for param in params:
                if param != "tmp_path":
                    _fail(block, f"{key} takes a fixture the harness does not provide: {param}")
                kwargs[param] = tmp_path_factory.mktemp(key)
            value(**kwargs)
    except ExampleFailed:
        raise
    except BaseException as exc:
        import traceback

        _fail(block, f"raised {type(exc).__name__}: {exc}", traceback.format_exc())


def _parse_yaml(block: Block, work: Path) -> None:
    try:
        data = yaml.safe_load(block.body)
    except yaml.YAMLError as exc:
        _fail(block, f"is not valid YAML: {exc}")
    name = _header_file(block)
    if name:
        target = work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.body, encoding="utf-8")
        return
    if isinstance(data, dict) and "company" in data and "agents" in data:
        chart = work / f".example-{block.line}.yaml"
        chart.write_text(block.body, encoding="utf-8")
        try:
            load_org(chart)
        except Exception as exc:
            _fail(block, f"is not a valid org chart: {exc}")


def _parse_json(block: Block) -> None:
    try:
        json.loads(block.body)
    except json.JSONDecodeError as exc:
        _fail(block, f"is not valid JSON: {exc}")


def _problems(found: list[Block]) -> list[str]:
    problems = []
    for block in found:
        if block.not_run is not None or block.kind in SHOWN:
            continue
        if not block.lang:
            problems.append(
                f"{block.where}: a code block without a language: tag it sh, python, yaml, "
                "json, or text/console for shown output, or put <!-- not-run: why --> before it"
            )
        elif block.kind not in KNOWN:
            problems.append(
                f"{block.where}: language {block.lang!r} is neither run nor parsed here; "
                "use text, or put <!-- not-run: why --> before it"
            )
    return problems


@pytest.fixture
def model_env(monkeypatch):
    with ModelServer(ScriptedModel()) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FIRM_")}
        env.update(server.env())
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        for key in [k for k in os.environ if k.startswith("FIRM_")]:
            monkeypatch.delenv(key)
        for key, value in server.env().items():
            monkeypatch.setenv(key, value)
        yield env


@pytest.mark.parametrize("doc", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_every_example_runs(doc, tmp_path, tmp_path_factory, model_env, monkeypatch):
    found = blocks(doc)
    problems = _problems(found)
    assert not problems, "\n".join(problems)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    namespace: dict = {"__name__": f"example_{doc.stem}"}
    for block in found:
        if block.not_run is not None or block.kind in SHOWN:
            continue
        if block.kind == "sh":
            _run_sh(block, work, model_env)
        elif block.kind == "python":
            _run_python(block, work, namespace, tmp_path_factory)
        elif block.kind == "yaml":
            _parse_yaml(block, work)
        elif block.kind == "json":
            _parse_json(block)


def test_the_harness_reports_file_and_line(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text(
        "text\n\n```\nfirm tasks\n```\n\n<!-- not-run: needs a server -->\n```sh\nx\n```\n"
    )
    found = blocks(doc)
    assert [b.line for b in found] == [3, 8]
    assert found[1].not_run == "needs a server"
    assert _problems(found) == [
        f"{found[0].where}: a code block without a language: tag it sh, python, yaml, json, "
        "or text/console for shown output, or put <!-- not-run: why --> before it"
    ]
    assert found[0].where.endswith("x.md:3")
