"""Real browser: headless Chromium opens the HTML report offline; no script errors, the plots
render (their colours are on the screenshot), and a hostile trace runs no script.

Chromium comes from Debian's ``chromium`` package; the set-up installs it when missing
(CI runs as root). The test is skipped, with the reason, only when that is impossible.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from profplug.analyzers.compare import compare
from profplug.analyzers.render.html import COLORS, render_html
from profplug.analyzers.report import analyze
from unit.analyzers.test_compare_synth import build_rank, sample_run_dirs, write_run

pytestmark = pytest.mark.browser

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-default-apps", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=10000"]
HOSTILE = ("<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','1')\">"
           "<script>document.documentElement.setAttribute('data-pwned','1')</script>")


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
def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser") or _install_chromium()
    if path is None:
        pytest.skip("chromium is not installed and `apt-get install -y chromium` is not "
                    "possible here (needs root and apt)")
    return path


def open_page(chromium: str, page: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    return subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *args,
                           page.as_uri()], capture_output=True, text=True, timeout=60,
                          check=False)


def console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines()
            if "Uncaught" in line or ("CONSOLE" in line and "ERROR" in line)]


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


def colour_pixels(png: bytes, hex_colour: str) -> int:
    _w, _h, ch, px = read_png(png)
    rgb = bytes(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return sum(1 for i in range(0, len(px), ch) if px[i:i + 3] == rgb)


def _run(tmp: Path) -> list[Path]:
    """The 2-GPU decode loop's device run (host-bound idle shows), else any sample run."""
    runs = sample_run_dirs()
    decode = [r for r in runs if "pp2_infer_kineto" in str(r) and "device" in str(r)]
    return (decode or runs)[:1] if runs else [write_run(tmp, "device")]


def test_compare_page_renders_without_errors(chromium: str, tmp_path: Path) -> None:
    # given the compare page of a device run and an event run (synthetic)
    a = analyze([write_run(tmp_path, "device")])
    b = analyze([write_run(tmp_path, "event")])
    page = tmp_path / "compare.html"
    with page.open("w") as f:
        render_html(a, f, compare=compare(a, b, "device", "event"))
    # when Chromium loads it and dumps the DOM after the scripts ran
    res = open_page(chromium, page, tmp_path, "--dump-dom")
    dom = res.stdout
    # then no script error, both plots drawn by plotly (its SVG is in the DOM)
    html_tag = re.search(r"<html[^>]*>", dom)
    assert html_tag is not None, res.stderr[-2000:]
    assert "data-errors" not in html_tag.group(0), html_tag.group(0)
    assert 'data-rendered="2"' in html_tag.group(0)
    assert dom.count('class="main-svg"') >= 4  # two plots, two layers each
    assert console_errors(res.stderr) == []


def test_screenshot_shows_the_plots(chromium: str, tmp_path: Path) -> None:
    # given a report of the synthetic device run (a known, large device_sync share)
    page = tmp_path / "report.html"
    with page.open("w") as f:
        render_html(analyze([write_run(tmp_path, "device")]), f)
    shot = tmp_path / "shot.png"
    # when screenshotted
    res = open_page(chromium, page, tmp_path, f"--screenshot={shot}",
                    "--window-size=1200,2200", "--hide-scrollbars")
    assert shot.is_file(), res.stderr[-2000:]
    png = shot.read_bytes()
    # then the plot colours are on it (nothing else on the page uses them)
    assert colour_pixels(png, COLORS["compute"]) > 2000  # bars and busy spans
    assert colour_pixels(png, COLORS["device_sync"]) > 500
    assert console_errors(res.stderr) == []


def test_sample_run_screenshot_shows_the_plots(chromium: str, tmp_path: Path) -> None:
    # given the report of a real sample run (the synthetic run when none is shipped)
    page = tmp_path / "report.html"
    with page.open("w") as f:
        render_html(analyze(_run(tmp_path)), f)
    shot = tmp_path / "shot.png"
    res = open_page(chromium, page, tmp_path, f"--screenshot={shot}",
                    "--window-size=1200,2200", "--hide-scrollbars")
    assert shot.is_file(), res.stderr[-2000:]
    # then compute and host-bound idle (the bulk of a real decode window) are drawn
    png = shot.read_bytes()
    assert colour_pixels(png, COLORS["compute"]) > 2000
    assert colour_pixels(png, COLORS["host_bound"]) > 500
    assert console_errors(res.stderr) == []


def test_hostile_trace_runs_no_script(chromium: str, tmp_path: Path) -> None:
    # given a trace whose kernel and annotation names are HTML that would run script
    d = tmp_path / "evil"
    d.mkdir()
    build_rank("device", 0, kernel=HOSTILE, annotation=HOSTILE).write(d / "rank0.json")
    page = tmp_path / "evil.html"
    with page.open("w") as f:
        render_html(analyze([d]), f)
    # when the browser opens it
    res = open_page(chromium, page, tmp_path, "--dump-dom")
    html_tag = re.search(r"<html[^>]*>", res.stdout)
    # then nothing ran, the page still rendered, and the name shows as text
    assert html_tag is not None and "data-pwned" not in html_tag.group(0)
    assert 'data-rendered="2"' in html_tag.group(0)
    assert "&lt;script&gt;document.documentElement" in res.stdout


def test_hostile_run_label_is_text_in_the_plots(chromium: str, tmp_path: Path) -> None:
    # given a compare page whose run A is a directory named like plotly's tags: a link and
    # 90px red text (plotly draws <a href> and <span style> found in labels)
    label = ('<a href="https://example.com/x">link</a>'
             '<span style="font-size:90px;color:red">big</span>')
    a = analyze([write_run(tmp_path, "device")])
    b = analyze([write_run(tmp_path, "event")])
    page = tmp_path / "compare.html"
    with page.open("w") as f:
        render_html(a, f, compare=compare(a, b, label, "event"))
    # when Chromium renders it
    res = open_page(chromium, page, tmp_path, "--dump-dom")
    dom = res.stdout
    html_tag = re.search(r"<html[^>]*>", dom)
    assert html_tag is not None and 'data-rendered="2"' in html_tag.group(0)
    # then the plots hold no link and no styled span from the label, only its text
    svg = "".join(re.findall(r'<svg class="main-svg".*?</svg>', dom, re.S))
    assert svg and not re.search(r"<a\b", svg)
    assert not re.search(r"<tspan[^>]*font-size: ?90px", svg)
    assert "&lt;a href=" in svg  # the label, as text
    assert console_errors(res.stderr) == []
