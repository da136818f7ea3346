"""Carriage-return progress bars reduced to their last state in non-terminal output."""

from __future__ import annotations

import sys

from profplug.session import progress
from profplug.session.progress import HOLD_LIMIT, CarriageFilter

BAR = b"".join(b"\rProcessing 9 events: [" + b"=" * i + b" " * (10 - i) + b"]"
               for i in range(11)) + b"\n"
LAST = b"Processing 9 events: [==========]\n"


def filtered(data: bytes, size: int) -> bytes:
    f = CarriageFilter()
    out = b"".join(f.feed(data[i:i + size]) for i in range(0, len(data), size))
    return out + f.close()


def test_a_bar_keeps_only_its_last_state_however_the_bytes_arrive() -> None:
    data = b"before\n" + BAR + b"after\n"
    for size in (1, 3, 7, 64, len(data)):
        assert filtered(data, size) == b"before\n" + LAST + b"after\n"


def test_output_without_carriage_returns_is_unchanged() -> None:
    data = b"line one\n\xff\xfe binary\n\nno newline at the end"
    assert filtered(data, 5) == data


def test_a_crlf_line_ending_is_kept() -> None:
    for size in (1, 4, 13):
        assert filtered(b"windows line\r\nnext\n", size) == b"windows line\r\nnext\n"


def test_a_bar_that_never_ends_its_line_holds_only_its_latest_state() -> None:
    f = CarriageFilter()
    for _ in range(10_000):
        assert f.feed(b"\r[=====     ] 50%") == b""
    assert f.close() == b"[=====     ] 50%"


def test_a_long_partial_line_is_written_out_not_held() -> None:
    f = CarriageFilter()
    assert f.feed(b"x" * (HOLD_LIMIT + 1)) == b"x" * (HOLD_LIMIT + 1)


def test_a_child_writing_bars_to_a_pipe_shows_each_bar_once(capfd) -> None:
    code = ("import sys\n"
            "for s in (sys.stdout, sys.stderr):\n"
            "    for p in range(0, 101, 10):\n"
            "        s.write(f'\\rProcessing 5 events: {p}%'); s.flush()\n"
            "    s.write('\\ndone\\n'); s.flush()\n")
    assert progress.run_quieted([sys.executable, "-c", code]) == 0
    out, err = capfd.readouterr()
    assert out == err == "Processing 5 events: 100%\ndone\n"


def test_a_terminal_gets_the_bars_as_they_are(capfd, monkeypatch) -> None:
    monkeypatch.setattr(progress, "_isatty", lambda fd: True)
    code = "import sys; sys.stdout.write('\\r10%\\r100%\\n')"
    assert progress.run_quieted([sys.executable, "-c", code]) == 0
    assert capfd.readouterr().out == "\r10%\r100%\n"
