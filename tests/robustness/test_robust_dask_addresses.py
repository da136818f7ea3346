"""``--dask ADDRESS`` fails in one line, at once or within the
connect timeout, never with a traceback or a hang; out of memory on a worker is exit 3, as
in a local process."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("distributed")
import dask
from profplug.analyzers.core.errors import ProfplugError, TraceError
from profplug.analyzers.readers.base import ReadOptions
from profplug.analyzers.scale import dask_backend
from profplug.analyzers.scale.dask_backend import DaskBackend
from profplug.analyzers.scale.dispatch import RankTask

from profplug.cli.main import main


@pytest.mark.parametrize(("address", "why"), [
    ("tcp://", "needs a host and a port"), ("tcp://:abc", "needs a host and a port"),
    ("tcp://127.0.0.1:", "needs a host and a port"),
    ("tcp://127.0.0.1:99999", r"port 99999 out of range"),
    ("tls://127.0.0.1:8786", "tls:// needs Dask's TLS settings"),
    ("ucx://127.0.0.1:8786", "ucx:// is not supported"),
    ("inproc://x", "inproc:// is not supported")])
def test_a_malformed_address_fails_at_once_in_one_line(address: str, why: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(ProfplugError, match=why):
        DaskBackend(address)
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize(("text", "why"), [
    ("garbage", "not a scheduler file .not JSON"), ("{}", 'no "address" string'),
    ('{"address": 5}', 'no "address" string'), ("[]", 'no "address" string'),
    ('{"address": "tcp://:1"}', "needs a host and a port")])
def test_a_bad_scheduler_file_fails_in_one_line(tmp_path: Path, text: str, why: str) -> None:
    f = tmp_path / "scheduler.json"
    f.write_text(text)
    with pytest.raises(ProfplugError, match=why):
        DaskBackend(str(f))


def test_a_missing_scheduler_file_is_named_so(tmp_path: Path) -> None:
    with pytest.raises(ProfplugError, match="no such scheduler file"):
        DaskBackend(str(tmp_path / "gone.json"))


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP server on loopback that accepts connections and never says a word."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    yield srv.getsockname()[1]
    stop.set()
    th.join()
    for c in held:
        c.close()
    srv.close()


def test_a_server_that_never_answers_times_out_in_one_line(silent_server: int) -> None:
    t0 = time.monotonic()
    with dask.config.set({"distributed.comm.timeouts.connect": "0.5s"}), \
            pytest.raises(ProfplugError, match=r"no Dask handshake within 0\.5 s"):
        DaskBackend(f"tcp://127.0.0.1:{silent_server}")
    assert time.monotonic() - t0 < 15


def test_the_cli_says_one_line_for_a_refused_port(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "rank0.json").write_text('{"traceEvents": []}')
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nobody listens there now
    t0 = time.monotonic()
    assert main(["report", str(tmp_path / "rank0.json"), "--dask", f"tcp://127.0.0.1:{port}"]) != 0
    assert time.monotonic() - t0 < 10
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("profplug: error: --dask")


def test_out_of_memory_on_a_worker_is_a_trace_error_as_locally(tmp_path: Path) -> None:
    class Fut:
        def result(self) -> None:
            raise MemoryError

        def release(self) -> None:
            pass

    task = RankTask(tmp_path / "rank0.json", 0, ReadOptions())
    with pytest.raises(TraceError, match="out of memory on a Dask worker") as exc:
        DaskBackend._result(Fut(), task)
    assert exc.value.exit_code == 3  # as main's MemoryError in a local process


def test_a_scheduler_address_that_answers_connects() -> None:
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, processes=False, protocol="tcp",
                      dashboard_address=None) as cluster:
        b = DaskBackend(cluster.scheduler_address)
        try:
            assert b.n_threads >= 1
        finally:
            b.close()
    assert dask_backend.check_address("tcp://[::1]:8786") == ("tcp", "::1", 8786)
