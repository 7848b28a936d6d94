"""The company's Ed25519 key pair: made on first use beside the database, private key 0600.

Files, in the state folder (beside the SQLite file; ./.firm for a server database, or
FIRM_KEY_DIR when set — every worker of a PostgreSQL company must share the same pair):

- ``audit_ed25519``      the private key (PKCS#8 PEM), readable by its owner only;
- ``audit_ed25519.pub``  the public key as one line, ``ed25519:<base64 of the 32 raw bytes>``.

The public key text is what `firm audit pubkey` prints and `firm audit verify --pubkey` takes.
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from firm.chain import canonical_json
from firm.errors import FirmError

PRIVATE_NAME = "audit_ed25519"
PUBLIC_NAME = "audit_ed25519.pub"
PREFIX = "ed25519:"


class AuditKeyError(FirmError):
    """The key pair cannot be made, read, or a public key given is malformed."""


def key_dir_for(url: str) -> Path:
    from firm.store import state_dir_for

    override = os.environ.get("FIRM_KEY_DIR")
    return Path(override) if override else state_dir_for(url)


def head_message(seq: int, hash_: str) -> bytes:
    """What a signature over the log's head covers: this entry, and through it the whole
    chain before it. Labelled so a signature cannot be replayed as one over something else."""
    return canonical_json({"firm_audit_head": 1, "seq": seq, "hash": hash_}).encode()


def public_text(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PREFIX + base64.b64encode(raw).decode()


def parse_public_key(text: str) -> Ed25519PublicKey:
    """Read a public key from `ed25519:BASE64`, bare base64, or a PEM block."""
    text = text.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_public_key(text.encode())
            if not isinstance(key, Ed25519PublicKey):
                raise AuditKeyError("the PEM key is not an Ed25519 public key")
            return key
        body = text[len(PREFIX) :] if text.startswith(PREFIX) else text
        raw = base64.b64decode(body, validate=True)
        return Ed25519PublicKey.from_public_bytes(raw)
    except AuditKeyError:
        raise
    except ValueError:
        raise AuditKeyError(
            "not an Ed25519 public key (expected 'ed25519:' and 44 base64 characters, "
            "as `firm audit pubkey` prints)"
        ) from None


def signature_valid(key: Ed25519PublicKey, seq: int, hash_: str, signature: str) -> bool:
    try:
        key.verify(base64.b64decode(signature, validate=True), head_message(seq, hash_))
        return True
    except (InvalidSignature, ValueError, TypeError):
        return False


@dataclass(frozen=True)
class AuditKey:
    private: Ed25519PrivateKey
    folder: Path

    @property
    def public(self) -> Ed25519PublicKey:
        return self.private.public_key()

    @property
    def public_text(self) -> str:
        return public_text(self.public)

    def sign_head(self, seq: int, hash_: str) -> str:
        return base64.b64encode(self.private.sign(head_message(seq, hash_))).decode()


def _write_new(path: Path, data: bytes, mode: int) -> bool:
    """Create `path` with `data` and `mode` atomically; False if it already exists.

    Written to a private temporary file and hard-linked into place, so a reader never sees a
    half-written key and two processes making a key at once agree on one.
    """
    # A name of its own per attempt: threads of one process share the pid.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def load_key(folder: Path) -> AuditKey | None:
    """The key pair in `folder`, or None if there is none yet."""
    path = folder / PRIVATE_NAME
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise AuditKeyError(
            f"{path} can be read by others (mode {stat.S_IMODE(st.st_mode):o}); "
            f"make it private with: chmod 600 {path}"
        )
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (ValueError, OSError) as exc:
        raise AuditKeyError(f"cannot read the audit key {path}: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise AuditKeyError(f"{path} is not an Ed25519 private key")
    return AuditKey(key, folder)


def load_or_create_key(folder: Path) -> AuditKey:
    """The company's key pair, made on first use."""
    existing = load_key(folder)
    if existing is not None:
        return existing
    try:
        folder.mkdir(parents=True, exist_ok=True)
        private = Ed25519PrivateKey.generate()
        pem = private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        _write_new(folder / PRIVATE_NAME, pem, 0o600)
    except OSError as exc:
        raise AuditKeyError(f"cannot create the audit key in {folder}: {exc}") from None
    key = load_key(folder)
    assert key is not None
    pub = folder / PUBLIC_NAME
    if not pub.exists():
        with contextlib.suppress(OSError):
            _write_new(pub, (key.public_text + "\n").encode(), 0o644)
    return key
