"""`firm audit`: export a task tree's signed trail, print the public key, verify a bundle."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from firm.api import Firm
from firm.audit.keys import AuditKeyError, key_dir_for, load_key, parse_public_key
from firm.audit.verify import verify_bundle
from firm.cli.common import EXIT_FAILED, DbOption, JsonOption, err_console, print_json
from firm.errors import FirmError
from firm.store import resolve_db

EXIT_PARTIAL = 3  # every check holds, but the bundle ends before its tree did
# A bundle is read whole and parsed into memory about ten times its size: one from elsewhere is
# refused above this size before a byte is read, unless the person checking asks for more.
BUNDLE_MAX_MB = 1024

audit_app = typer.Typer(
    name="audit",
    help="The signed audit trail: export a task tree, print the public key, verify a bundle.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@audit_app.command()
def export(
    task_id: Annotated[str, typer.Argument(help="The task whose tree to export.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the bundle here [default: stdout].")
    ] = None,
    db: DbOption = None,
) -> None:
    """Write the events of a task's tree as a self-contained bundle, signed."""
    with Firm(db) as firm:
        bundle = firm.export_audit(task_id)
    text = json.dumps(bundle, indent=1, ensure_ascii=False) + "\n"
    if output is None:
        sys.stdout.write(text)
        return
    tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(output)
    head = bundle["head"]
    disclosed = sum(1 for e in bundle["entries"] if "data" in e)
    err_console.print(
        f"Wrote {output}: {len(bundle['entries'])} entries ({disclosed} disclosed), "
        f"head {head['seq']} signed by {head['public_key']}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@audit_app.command()
def pubkey(db: DbOption = None) -> None:
    """Print the company's public key (save it to a file for `firm audit verify --pubkey`)."""
    with Firm(db) as firm:
        print(firm.audit_key().public_text)


def _read_key(value: str) -> str:
    path = Path(value)
    if len(value) < 4096 and path.is_file():
        return path.read_text(encoding="utf-8")
    return value


@audit_app.command()
def verify(
    bundle_file: Annotated[Path, typer.Argument(help="The bundle (from `firm audit export`).")],
    pubkey_value: Annotated[
        str | None,
        typer.Option(
            "--pubkey",
            help="The company's public key, or a file holding it (from `firm audit pubkey`).",
        ),
    ] = None,
    db: DbOption = None,
    json_mode: JsonOption = False,
    max_mb: Annotated[
        int,
        typer.Option(
            "--max-mb",
            min=1,
            metavar="MB",
            help="Refuse a bundle larger than this many megabytes, before reading it.",
        ),
    ] = BUNDLE_MAX_MB,
) -> None:
    """Check a bundle from it and the key alone: integrity, monotonicity, containment.
    Exits 0 only when every check passes and the tree had ended at the signed head; 3 when
    every check passes but the tree was still open there (the bundle proves a prefix)."""
    try:
        size = bundle_file.stat().st_size
        if size > max_mb * 1_000_000:
            raise FirmError(
                f"{bundle_file}: {size / 1e6:,.0f} MB, larger than --max-mb {max_mb}: not read "
                "(pass a larger --max-mb to check a bundle this size)"
            )
        bundle = json.loads(bundle_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FirmError(f"{bundle_file}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FirmError(f"{bundle_file}: cannot read it: {exc}") from None
    except json.JSONDecodeError as exc:
        raise FirmError(f"{bundle_file}: not a bundle (not JSON: {exc})") from None
    except RecursionError:
        raise FirmError(f"{bundle_file}: not a bundle (JSON nested too deeply)") from None
    if not isinstance(bundle, dict):
        raise FirmError(f"{bundle_file}: not a bundle (a JSON object was expected)")
    key = None
    source = ""
    if pubkey_value is not None:
        try:
            key = parse_public_key(_read_key(pubkey_value))
        except AuditKeyError as exc:
            raise FirmError(f"--pubkey: {exc}") from None
    elif db is not None:
        # The company checking its own bundle: the key beside the database it names.
        local = load_key(key_dir_for(resolve_db(db)))
        if local is not None:
            key, source = local.public, f" (the key beside {db})"
    report = verify_bundle(bundle, key)
    code = 0 if report.verified else EXIT_PARTIAL if report.partial else EXIT_FAILED
    if json_mode:
        verdict = "verified" if report.verified else "partial" if report.partial else "failed"
        print_json(
            {
                "verdict": verdict,
                "checks": [
                    {"name": c.name, "verdict": c.verdict, "detail": c.detail}
                    for c in report.checks
                ],
                "open_at": report.open_at,
                "key": source.strip(" ()") or ("--pubkey" if key is not None else None),
            }
        )
        raise typer.Exit(code)
    for check in report.checks:
        print(check.line())
    if report.verified:
        print(f"VERIFIED{source}: every check holds")
        raise typer.Exit(0)
    if report.partial:
        print(report.partial_line())
        raise typer.Exit(EXIT_PARTIAL)
    print("NOT VERIFIED")
    raise typer.Exit(EXIT_FAILED)


def register(app: typer.Typer) -> None:
    app.add_typer(audit_app, name="audit")
