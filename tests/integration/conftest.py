"""The browser tests' ``chromium`` fixture: headless Chromium, from Debian's ``chromium``
package (installed when missing and possible: CI runs as root; else each browser test is
skipped, with the reason). One pytest worker installs it, without the packages Debian only
recommends beside it (printing, desktop services, fonts the pages do not use), while the
others wait for it (a lock), then find it. ``chromium.open(page, tmp, *args)`` loads a page
offline (``--dump-dom`` or ``--screenshot=FILE`` among ``args``);
``chromium.console_errors(stderr)`` lists the script errors it logged;
``chromium.colour_pixels(png, "#rrggbb")`` counts the pixels of one colour on a screenshot."""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

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
        pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
        rgb = [int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]
        return int(np.all(pixels == rgb, axis=-1).sum())


def _install_chromium() -> str | None:
    """``apt-get install chromium`` (after ``apt-get update`` if that alone fails), by one
    worker at a time: a second one, started while the first holds dpkg's lock, would fail."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"]
    with open(Path(tempfile.gettempdir()) / "profplug-tests-chromium.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for cmd in (install, ["apt-get", "update", "-q"], install):
            if shutil.which("chromium"):
                break
            subprocess.run(cmd, env=env, capture_output=True, timeout=600, check=False)
    return shutil.which("chromium")


@pytest.fixture(scope="session")
def chromium() -> Chromium:
    path = shutil.which("chromium") or shutil.which("chromium-browser") or _install_chromium()
    if path is None:
        pytest.skip("chromium is not installed and `apt-get install -y chromium` is not "
                    "possible here (needs root and apt)")
    return Chromium(path)
