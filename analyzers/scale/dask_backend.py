"""Ranks on a Dask cluster (``--dask ADDRESS``): the sibling of ``dispatch.LocalBackend``.

``ADDRESS`` is a running scheduler (``tcp://host:port``, or a scheduler file as written by
``dask scheduler --scheduler-file``), or ``local[:N]``: a LocalCluster of N worker processes
(default: the usable CPUs) of one thread each. Dask (``pip install 'profplug[dask]'``) is
imported here only, when a backend is opened: the analyzer without it imports no dask.

Each task (``dispatch.run_task``) runs on a worker, which reads the file from its own path
(a filesystem the workers share with the client). What comes back is the task's
``FileResult``; its Timelines, when a run-level analysis needs them, travel as ``.npz``
bytes (``Timeline.save``, uncompressed: see ``_packed``), decoded in the client.

A worker that dies running a task (killed, out of memory) costs the task one retry on
another worker (the scheduler's ``allowed-failures``, set to 1 for a LocalCluster; set
``DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=1`` where you start your own scheduler);
a second death leaves that file's ranks out with a one-line reason, and the report stands.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import io
import json
import logging
import re
import socket
import stat
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from profplug.analyzers.core.cpus import usable_cpus
from profplug.analyzers.core.errors import ProfplugError, TraceError
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.scale.dispatch import FileResult, RankTask, TaskFn, lost

ALLOWED_FAILURES = 1  # deaths of a task's worker before it is given up: one retry
LOCAL = "local"


def parse_local(address: str) -> int | None:
    """N of ``local[:N]`` (0: the usable CPUs), None when ``address`` is not local."""
    if address == LOCAL:
        return 0
    if not address.startswith(LOCAL + ":"):
        return None
    n = address[len(LOCAL) + 1:]
    if not n.isdigit() or int(n) < 1:
        raise ProfplugError(f"--dask {address}: local:N needs a number of workers >= 1")
    return int(n)


USAGE = "a scheduler address (tcp://host:port), a scheduler file or local[:N]"
MAX_SCHEDULER_FILE = 1 << 20  # bytes: a scheduler file is a few hundred
# host:port, the host a name, an IPv4 address or a bracketed IPv6 one
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([0-9]{1,5})\Z")
SCHEMES = ("tcp", "tls")  # what a client of a remote scheduler here can speak


def check_address(address: str, where: str = "") -> tuple[str, str, int]:
    """(scheme, host, port) of a ``tcp://`` or ``tls://`` scheduler address; ProfplugError
    (one line, at once) for anything else: no host, no port, a port beyond 65535, another
    scheme (``inproc://`` lives in one process; ``ucx://`` needs UCX-Py, not supported)."""
    label = f"--dask {where or address}"
    scheme, sep, loc = address.partition("://")
    if not sep:
        raise ProfplugError(f"{label}: not {USAGE}")
    if scheme not in SCHEMES:
        raise ProfplugError(f"{label}: {scheme}:// is not supported (a scheduler is reached "
                            "over tcp://host:port, or tls:// with Dask's TLS settings)")
    m = _HOST_PORT.match(loc)
    if m is None:
        raise ProfplugError(f"{label}: not a scheduler address: {address!r} needs a host and "
                            "a port (tcp://host:port)")
    port = int(m.group(2))
    if not 1 <= port <= 65535:
        raise ProfplugError(f"{label}: port {port} out of range (1 .. 65535)")
    return scheme, m.group(1).strip("[]"), port


def read_scheduler_file(path: str) -> str:
    """The address in a scheduler file (``dask scheduler --scheduler-file``), checked; one
    line for a missing file, a FIFO or a device, or a file that holds no such address."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ProfplugError(f"--dask {path}: no such scheduler file (--dask takes {USAGE})") from None
    except OSError as exc:
        raise ProfplugError(f"--dask {path}: cannot read the scheduler file ({exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ProfplugError(f"--dask {path}: not a scheduler file (not a regular file)")
    if st.st_size > MAX_SCHEDULER_FILE:
        raise ProfplugError(f"--dask {path}: not a scheduler file (larger than "
                            f"{MAX_SCHEDULER_FILE >> 20} MiB)")
    try:
        doc = json.loads(p.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        raise ProfplugError(f"--dask {path}: not a scheduler file (not JSON: "
                            f"{str(exc)[:80]})") from None
    address = doc.get("address") if isinstance(doc, dict) else None
    if not isinstance(address, str):
        raise ProfplugError(f"--dask {path}: not a scheduler file (no \"address\" string in "
                            "a JSON object)")
    check_address(address, f"{path} (address {address!r})")
    return address


def connect_timeout() -> float:
    """Seconds to connect and hear the scheduler's handshake: Dask's
    ``distributed.comm.timeouts.connect`` (30 s unless set)."""
    import dask
    from dask.utils import parse_timedelta

    try:
        t = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect", "30s"))
    except (ValueError, TypeError, KeyError):
        t = 30.0
    return t if t and 0 < t < 3600 else 30.0


def connection_args(scheme: str, address: str) -> dict[str, Any]:
    """The client's connection arguments; tls:// without a TLS setup is refused at once."""
    from distributed.security import Security

    sec = Security()
    # set from Dask's config in Security's __init__ (no declared attributes)
    ca, cert = getattr(sec, "tls_ca_file", None), getattr(sec, "tls_client_cert", None)
    if scheme == "tls" and not (ca or cert):
        raise ProfplugError(f"--dask {address}: tls:// needs Dask's TLS settings "
                            "(distributed.comm.tls.ca-file, .client.cert/.key)")
    return sec.get_connection_args("client") if scheme == "tls" else {}


def probe(address: str, host: str, port: int, timeout: float, args: dict[str, Any]) -> None:
    """Connect, and hear the scheduler's handshake, within ``timeout`` seconds; one line
    otherwise. A refused port fails at once; a server that accepts and never answers fails
    after ``timeout`` (Dask's own connect waits for the handshake without a limit)."""
    from distributed.comm import connect

    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise ProfplugError(f"--dask {address}: cannot connect "
                            f"({exc.strerror or type(exc).__name__})") from None

    async def handshake() -> None:
        comm = await asyncio.wait_for(connect(address, timeout=timeout, **args), timeout)
        await comm.close()

    try:
        asyncio.run(handshake())
    except TimeoutError:
        raise ProfplugError(f"--dask {address}: no Dask handshake within {timeout:g} s (not a "
                            "Dask scheduler, or it hangs; distributed.comm.timeouts.connect "
                            "sets the wait)") from None
    except Exception as exc:
        raise ProfplugError(f"--dask {address}: cannot connect ({type(exc).__name__}: "
                            f"{str(exc)[:120]})") from None


def _packed(fn: TaskFn, task: RankTask) -> FileResult:
    """``fn(task)`` on a worker, its Timelines as npz bytes (no pickle). Uncompressed:
    compressing costs the worker more CPU than the smaller transfer saves on a cluster's
    network (benchmarks/2026-12-03/README.md, "Figures moved from code comments")."""
    res = fn(task)
    blobs: list[Any] = []
    for tl in res.timelines:
        buf = io.BytesIO()
        tl.save(buf, compress=False)
        blobs.append(buf.getvalue())
    return replace(res, timelines=blobs)


def unpack(res: FileResult) -> FileResult:
    """The client side of ``_packed``."""
    if not res.timelines or isinstance(res.timelines[0], Timeline):
        return res
    tls = [Timeline.load(io.BytesIO(b)) for b in res.timelines]
    return replace(res, timelines=tls)


# a LocalCluster's settings: a task of a worker that died goes to another worker once
# (``ALLOWED_FAILURES``); no GPU monitoring (NVML), which the analysis never reads and which
# costs each worker memory on a GPU machine
LOCAL_CONFIG = MappingProxyType({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
                                 "distributed.diagnostics.nvml": False})


_open: weakref.WeakSet[DaskBackend] = weakref.WeakSet()


def close_all() -> None:
    """Close every backend still open; registered anew with each backend, after
    distributed's own exit handlers, so that it runs before them (last in, first out)."""
    for b in list(_open):
        with contextlib.suppress(Exception):
            b.close()


class DaskBackend:
    """Tasks on the workers of a Dask cluster; a LocalCluster for ``local[:N]``."""

    name = "dask"

    def __init__(self, address: str) -> None:
        try:
            import dask
            from distributed import Client, LocalCluster
            from distributed.security import Security
        except ImportError:
            raise ProfplugError("--dask needs Dask: pip install 'profplug[dask]'") from None
        self.address = address
        self.cluster: Any = None
        self.client: Any = None  # distributed's Client (untyped)
        n = parse_local(address)
        # its workers see this machine's temporary folder (a LocalCluster): a report's
        # scratch cache can serve them (placement.scratch_cache)
        self.shares_disk = n is not None
        try:
            if n is not None:
                with dask.config.set(LOCAL_CONFIG):
                    self.cluster = LocalCluster(
                        n_workers=n or usable_cpus(), threads_per_worker=1, processes=True,
                        dashboard_address=":0", silence_logs=logging.CRITICAL)
                self.client = Client(self.cluster)
            else:
                target = address if "://" in address else read_scheduler_file(address)
                scheme, host, port = check_address(target)
                timeout = connect_timeout()
                args = connection_args(scheme, target)
                probe(target, host, port, timeout, args)
                with dask.config.set({"distributed.comm.timeouts.connect": f"{timeout}s"}):
                    self.client = Client(target, timeout=timeout,
                                         security=None if scheme == "tcp" else Security())
        except ProfplugError:
            self.close()
            raise
        except Exception as exc:  # whatever Dask raises: one line, never a traceback
            self.close()
            raise ProfplugError(f"--dask {address}: cannot connect ({type(exc).__name__}: "
                                f"{str(exc)[:120]})") from None
        _open.add(self)  # closed at exit if the caller does not (close_all)
        atexit.unregister(close_all)
        atexit.register(close_all)

    def map(self, fn: TaskFn, tasks: Sequence[RankTask]) -> Iterator[tuple[int, FileResult]]:
        """At most one task per worker thread in flight (the next one is submitted when one
        finishes): a worker holds one rank at a time, and a worker's death only ever makes
        the task it was running suspect, never one that waited beside it."""
        from distributed import as_completed

        todo = list(enumerate(tasks))[::-1]
        slots = max(1, self.n_threads)
        running: dict[object, tuple[int, Any]] = {}  # Dask's key: (task index, future)
        done = as_completed()

        def submit() -> None:
            i, t = todo.pop()
            fut = self.client.submit(_packed, fn, t, pure=False,
                                     key=f"profplug-rank-{i}-{t.path.name}")
            running[fut.key] = (i, fut)
            done.add(fut)

        while todo and len(running) < slots:
            submit()
        try:
            for fut in done:
                i, _ = running.pop(fut.key)
                res = self._result(fut, tasks[i])
                if todo:
                    submit()
                yield i, res
        finally:
            if running:  # abandoned (a reader's error is raised by the caller)
                self.client.cancel([f for _, f in running.values()])

    @property
    def n_threads(self) -> int:
        workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        return sum(int(w.get("nthreads", 1)) for w in workers.values())

    @staticmethod
    def _result(fut: Any, task: RankTask) -> FileResult:
        from distributed.client import FutureCancelledError
        from distributed.scheduler import KilledWorker

        try:
            res = unpack(fut.result())
        except KilledWorker:
            res = lost(task, "the Dask worker running it died twice (killed, or out of "
                             "memory)")
        except FutureCancelledError:
            res = lost(task, "its Dask task was cancelled")
        except ProfplugError:
            raise
        except MemoryError:  # as in a local process: out of memory is a trace's cost, exit 3
            raise TraceError(f"{task.path}: out of memory on a Dask worker (the trace needs "
                             "more than the worker has; docs/robustness.md)") from None
        except Exception as exc:  # e.g. the path does not exist on the worker
            raise ProfplugError(f"{task.path}: failed on a Dask worker "
                                f"({type(exc).__name__}: {exc})") from None
        finally:
            fut.release()  # the worker may forget the result now
        return res

    def close(self) -> None:
        """Disconnect (and stop a ``local`` cluster); again is a no-op. Also run at exit
        for a backend the caller did not close: Dask's own exit handlers then print an
        ERROR line and tracebacks for a client still connected."""
        client, self.client = getattr(self, "client", None), None
        cluster, self.cluster = getattr(self, "cluster", None), None
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()

    def __enter__(self) -> DaskBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
