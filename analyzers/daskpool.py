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

import io
import logging
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ProfplugError
from .cpus import usable_cpus
from .dispatch import FileResult, RankTask, TaskFn, lost
from .timeline import Timeline

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


def _packed(fn: TaskFn, task: RankTask) -> FileResult:
    """``fn(task)`` on a worker, its Timelines as npz bytes (no pickle). Uncompressed: zlib
    made a 477 MB trace's Timeline 5x smaller (42 -> 8.5 MB) but cost 2.1 s of the worker's
    CPU, about half its parse, to save ~30 ms on a 10 Gb/s network (docs/scale.md)."""
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
    tls = [Timeline.load(io.BytesIO(b)) for b in res.timelines]  # type: ignore[arg-type]
    return replace(res, timelines=tls)


# a LocalCluster's settings: a task of a worker that died goes to another worker once
# (``ALLOWED_FAILURES``); no GPU monitoring (NVML), which the analysis never reads and which
# costs each worker ~19 MB on a GPU machine (an H200 host: 98 -> 79 MB idle; docs/scale.md)
LOCAL_CONFIG = {"distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
                "distributed.diagnostics.nvml": False}


class DaskBackend:
    """Tasks on the workers of a Dask cluster; a LocalCluster for ``local[:N]``."""

    name = "dask"

    def __init__(self, address: str) -> None:
        try:
            import dask
            from distributed import Client, LocalCluster
        except ImportError:
            raise ProfplugError("--dask needs Dask: pip install 'profplug[dask]'") from None
        self.address = address
        self.cluster: Any = None
        n = parse_local(address)
        # its workers see this machine's temporary folder (a LocalCluster): a report's
        # scratch cache can serve them (report.scratch_cache)
        self.shares_disk = n is not None
        try:
            if n is not None:
                with dask.config.set(LOCAL_CONFIG):
                    self.cluster = LocalCluster(
                        n_workers=n or usable_cpus(), threads_per_worker=1, processes=True,
                        dashboard_address=":0", silence_logs=logging.CRITICAL)
                self.client = Client(self.cluster)
            elif "://" in address:
                self.client = Client(address, timeout=30)
            elif Path(address).is_file():
                self.client = Client(scheduler_file=address, timeout=30)
            else:
                raise ProfplugError(f"--dask {address}: not a scheduler address "
                                    "(tcp://host:port), a scheduler file or local[:N]")
        except (OSError, TimeoutError) as exc:
            self.close()
            raise ProfplugError(f"--dask {address}: cannot connect ({exc})") from None

    def map(self, fn: TaskFn, tasks: Sequence[RankTask]) -> Iterator[tuple[int, FileResult]]:
        """At most one task per worker thread in flight (the next one is submitted when one
        finishes): a worker holds one rank at a time, and a worker's death only ever makes
        the task it was running suspect, never one that waited beside it."""
        from distributed import as_completed

        todo = list(enumerate(tasks))[::-1]
        slots = max(1, self.n_threads)
        running: dict[str, tuple[int, Any]] = {}  # key: (task index, future)
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
        except Exception as exc:  # e.g. the path does not exist on the worker
            raise ProfplugError(f"{task.path}: failed on a Dask worker "
                                f"({type(exc).__name__}: {exc})") from None
        finally:
            fut.release()  # the worker may forget the result now
        return res

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.close()
        if self.cluster is not None:
            self.cluster.close()
