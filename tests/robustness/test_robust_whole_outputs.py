"""Every file profplug writes is written whole or not at all (``core.atomicfile``): a write
that fails (a full disk, injected here as the OSError it raises) leaves the old file as it
was and no temporary beside it; a SIGTERM or SIGINT while a file is replaced leaves it whole
(the old or the new, never a part) and no temporary; two writers of one file and a reader
polling it: the reader never reads a part."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from profplug.analyzers.core import atomicfile
from profplug.analyzers.core.atomicfile import TMP_PREFIX, replace_bytes, replace_text, write_atomic
from synth import one_error, sync_loop

from profplug.cli.main import main


def _full_disk(*args: object, **kw: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(TMP_PREFIX))


@pytest.mark.parametrize("where", ["fsync", "replace"])
@pytest.mark.parametrize("cmd", [["report", "-f", "json", "-o"], ["report", "--html"],
                                 ["whatif", "-o"], ["report", "-f", "csv", "-o"]])
def test_a_failed_write_leaves_the_old_output_whole(tmp_path: Path, capsys, monkeypatch,
                                                    where: str, cmd: list[str]) -> None:
    (tmp_path / "in").mkdir()
    trace = sync_loop(tmp_path / "in" / "rank0.json")
    out = tmp_path / "out" / "report.out"
    out.parent.mkdir()
    old = b'{"an": "older report, complete"}\n' * 500
    out.write_bytes(old)
    monkeypatch.setattr(atomicfile.os, where, _full_disk)
    assert main([cmd[0], str(trace), *cmd[1:], str(out), "--jobs", "1"]) == 2
    line = one_error(capsys)
    assert "No space left on device" in line and "the file there is unchanged" in line
    assert out.read_bytes() == old
    assert _leftovers(out.parent) == []


def test_a_failed_write_of_a_new_output_leaves_nothing(tmp_path: Path, capsys,
                                                       monkeypatch) -> None:
    trace = sync_loop(tmp_path / "rank0.json")
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setattr(atomicfile.os, "fsync", _full_disk)
    assert main(["report", str(trace), "-f", "json", "-o", str(out / "r.json")]) == 2
    assert "No space left on device" in one_error(capsys)
    assert list(out.iterdir()) == []


def test_a_written_output_keeps_the_mode_of_the_file_it_replaces(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old")
    target.chmod(0o640)
    replace_text(target, "new")
    assert target.read_text() == "new" and (target.stat().st_mode & 0o777) == 0o640


def test_an_output_through_a_symbolic_link_replaces_its_target(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    replace_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_an_output_to_a_device_or_a_pipe_is_written_into_it(tmp_path: Path) -> None:
    atomicfile.write_output("/dev/null", "x" * 100)  # a rename would replace the device node
    assert Path("/dev/null").is_char_device()
    read, write = os.pipe()  # -o >(gzip > x.gz): a pipe under /dev/fd
    atomicfile.write_output(f"/dev/fd/{write}", "through the pipe")
    os.close(write)
    assert os.read(read, 100) == b"through the pipe"
    os.close(read)


def test_a_fifo_planted_under_a_cache_entry_is_replaced_not_opened(tmp_path: Path) -> None:
    entry = tmp_path / "entry.npz"
    os.mkfifo(entry)  # opening it to write would block for ever
    replace_bytes(entry, b"whole")
    assert entry.read_bytes() == b"whole" and _leftovers(tmp_path) == []


# writes until the test says its signal was sent (a file beside the target), however late
# a loaded machine lets the test send it
_SLOW_WRITER = """
import os, sys, time
from profplug.analyzers.core.atomicfile import write_atomic
def slow(fh):
    print("writing", flush=True)
    for _ in range(3000):
        fh.write(b"n" * 100_000)
        if os.path.exists(sys.argv[1] + ".sent"):
            break
        time.sleep(0.02)
write_atomic(sys.argv[1], slow)
"""


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_an_output_is_replaced_leaves_it_whole(tmp_path: Path,
                                                              sig: signal.Signals) -> None:
    target = tmp_path / "report.json"
    old = b"o" * 1_000_000
    target.write_bytes(old)
    # SIGINT's default action in the child whatever the suite's own (a suite started in the
    # background ignores SIGINT, and a child that inherits SIG_IGN keeps ignoring it)
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(target)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_default_sigint)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"writing\n"  # inside the write: the temporary exists
    proc.send_signal(sig)
    (tmp_path / "report.json.sent").touch()  # the writer may finish now
    proc.wait(timeout=120)
    assert proc.returncode != 0  # the signal still ends the process, after the replace
    got = target.read_bytes()
    assert got == old or (got and set(got) == {ord("n")} and len(got) % 100_000 == 0)
    assert _leftovers(tmp_path) == []


_OTHER_THREAD = """
import signal, sys, threading, time
from profplug.analyzers.core.atomicfile import write_atomic
idle = threading.Thread(target=time.sleep, args=(30,), daemon=True)  # as a BLAS pool's
idle.start()
def write(fh):
    fh.write(b"n" * 1000)
    signal.pthread_kill(idle.ident, signal.SIGTERM)  # delivered to the other thread
    time.sleep(0.2)
    fh.write(b"n" * 1000)
write_atomic(sys.argv[1], write)
print("not reached: SIGTERM ends the process once the file is whole")
"""


def test_a_sigterm_landing_on_another_thread_still_waits_for_the_replace(
        tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_bytes(b"old")
    out = subprocess.run([sys.executable, "-c", _OTHER_THREAD, str(target)],
                         capture_output=True, timeout=120)
    assert out.returncode == -signal.SIGTERM and b"not reached" not in out.stdout
    assert target.read_bytes() == b"n" * 2000
    assert _leftovers(tmp_path) == []


_WRITER = """
import json, sys
from profplug.analyzers.core.atomicfile import replace_text
for i in range(int(sys.argv[3])):
    replace_text(sys.argv[1], json.dumps({"writer": sys.argv[2], "i": i,
                                          "pad": [sys.argv[2]] * 20_000}))
"""


def test_two_writers_and_a_polling_reader_never_see_half_a_file(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    replace_text(target, json.dumps({"writer": "start", "i": -1, "pad": []}))
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(target), name, "60"])
               for name in ("a", "b")]
    reads, seen = 0, set()
    while any(w.poll() is None for w in writers) or reads < 50:
        doc = json.loads(target.read_bytes())  # a part would not parse
        assert len(doc["pad"]) in (0, 20_000)
        seen.add(doc["writer"])
        reads += 1
        time.sleep(0.001)
    assert all(w.wait(timeout=120) == 0 for w in writers)
    assert seen & {"a", "b"}
    assert _leftovers(tmp_path) == []


def test_a_timeline_saved_to_a_path_is_written_whole(tmp_path: Path, monkeypatch) -> None:
    from profplug.analyzers.readers.kineto.reader import read_kineto

    tl = read_kineto(sync_loop(tmp_path / "rank0.json"))
    path = tmp_path / "t.npz"
    tl.save(path)
    before = path.read_bytes()
    monkeypatch.setattr(atomicfile.os, "replace", _full_disk)
    with pytest.raises(OSError):
        tl.save(path, compress=False)
    assert path.read_bytes() == before and _leftovers(tmp_path) == []


def test_write_atomic_removes_its_temporary_when_the_writer_raises(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    target.write_text("old")

    def broken(fh: object) -> None:
        raise ValueError("renderer failed")

    with pytest.raises(ValueError):
        write_atomic(target, broken)
    assert target.read_text() == "old" and _leftovers(tmp_path) == []
    assert os.listdir(tmp_path) == ["x.json"]
