"""The browser tests' ``chromium`` fixture: headless Chromium, from Debian's ``chromium``
package (installed when missing and possible: CI runs as root; else each browser test is
skipped, with the reason). ``chromium.open(page, tmp, *args)`` loads a page offline
(``--dump-dom`` or ``--screenshot=FILE`` among ``args``); ``chromium.console_errors(stderr)``
lists the script errors it logged; ``chromium.colour_pixels(png, "#rrggbb")`` counts the
pixels of one colour on a screenshot."""

from __future__ import annotations

import io
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-default-apps", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=10000"]


class Chromium:
    def __init__(self, path: str) -> None:
        self.path = path

    def open(self, page: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
        """Chromium on ``page`` with a fresh profile under ``tmp``."""
        profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
        return subprocess.run([self.path, *FLAGS, f"--user-data-dir={profile}", *args,
                               page.as_uri()], capture_output=True, text=True, timeout=60,
                              check=False)

    @staticmethod
    def console_errors(stderr: str) -> list[str]:
        return [line for line in stderr.splitlines()
                if "Uncaught" in line or ("CONSOLE" in line and "ERROR" in line)]

    @staticmethod
    def colour_pixels(png: bytes, hex_colour: str) -> int:
        _w, _h, ch, px = read_png(png)
        rgb = bytes(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
        return sum(1 for i in range(0, len(px), ch) if px[i:i + 3] == rgb)


def read_png(data: bytes) -> tuple[int, int, int, bytes]:
    """(width, height, channels, raw pixel rows) of an 8-bit RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    w = h = ch = 0
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6)
            ch = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * ch
    out = io.BytesIO()
    prev = bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b = prev[i]
            c = prev[i - ch] if i >= ch else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.write(line)
        prev = line
    return w, h, ch, out.getvalue()


def _install_chromium() -> str | None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "install", "-y", "-q", "chromium"],
                ["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium"]):
        subprocess.run(cmd, env=env, capture_output=True, timeout=600, check=False)
        if shutil.which("chromium"):
            break
    return shutil.which("chromium")


@pytest.fixture(scope="session")
def chromium() -> Chromium:
    path = shutil.which("chromium") or shutil.which("chromium-browser") or _install_chromium()
    if path is None:
        pytest.skip("chromium is not installed and `apt-get install -y chromium` is not "
                    "possible here (needs root and apt)")
    return Chromium(path)
