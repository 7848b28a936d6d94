"""What the browser tests need: Debian's Chromium (installed here when missing; Playwright
never downloads a browser) and `firm serve` running in a real process."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def ensure_chromium() -> str | None:
    """Install Debian's chromium if it is missing; None when ready, else why not."""
    if CHROMIUM.exists():
        return None
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        return "chromium is not installed and cannot be installed here (needs apt-get as root)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for step in ([apt, "update", "-qq"], [apt, "install", "-y", "-qq", "chromium"]):
        done = subprocess.run(step, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0 and step[1] == "install":
            return f"apt-get install chromium failed: {done.stderr.strip()[-500:]}"
    return None if CHROMIUM.exists() else "chromium did not install to /usr/bin/chromium"


@dataclass
class ServedOffice:
    proc: subprocess.Popen[str]
    url: str
    token: str
    banner: list[str] = field(default_factory=list)
    output: list[str] = field(default_factory=list)

    def drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line.rstrip())

    def close(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)
        return "\n".join(self.output)


def serve(folder: Path, *args: str) -> ServedOffice:
    """`firm serve` on a free port, with the demo company, in folder."""
    from importlib import resources

    org = folder / "company.yaml"
    org.write_text(
        resources.files("firm").joinpath("examples/demo.yaml").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "firm", "serve", "company.yaml", "--port", "0", *args],
        cwd=folder,
        env={**os.environ, "FIRM_TOKEN": "browser-test-token", "COLUMNS": "200"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    banner: list[str] = []
    for line in proc.stdout:
        banner.append(line.rstrip())
        if line.startswith("Ctrl-C"):
            url = re.search(r"open at (http://\S+)", banner[0])
            assert url, banner
            served = ServedOffice(proc, url.group(1), "browser-test-token", banner)
            # Keep reading its output, so a full pipe can never stall the server.
            threading.Thread(target=served.drain, daemon=True).start()
            return served
    raise AssertionError("firm serve did not start:\n" + "\n".join(banner))
