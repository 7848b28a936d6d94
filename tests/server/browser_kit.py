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
# The page's plan (the 2D floor) is what a browser without WebGL shows; the 3D floor's tests
# (test_office3d) draw WebGL in software with SwiftShader instead.
PLAN_ARGS = ["--disable-webgl"]
WEBGL_ARGS = ["--use-angle=swiftshader", "--enable-unsafe-swiftshader"]
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


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and every pixel (RGB, row by row) of an 8-bit PNG (what Chromium's screenshots
    are), decoded with the standard library: the tests read what the page drew."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), f"unexpected PNG format {depth}/{colour}"
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, [bytes(r[i : i + 3]) for r in rows for i in range(0, stride, channels)]
