"""Flush a session at exit, on an uncaught exception and on SIGTERM/SIGINT.

A Python signal handler only runs when the main thread gets back to Python code; a rank
stuck in a CUDA/NCCL call would never flush. So a watcher thread also reads the signal
wake-up fd: if the main thread has not started flushing ``GRACE_S`` seconds after the
signal, the watcher flushes (Kineto records all threads) and exits with 128 + signal.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from profplug.session.core import Session

GRACE_S = 2.0
_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def install(session: Session) -> None:
    """Register the flush paths for ``session`` (signals only from the main thread)."""
    atexit.register(session.flush, "exit")
    previous_hook = sys.excepthook

    def excepthook(tp: Any, value: Any, tb: Any) -> None:
        session.end.exception = f"{tp.__name__}: {value}"
        session.flush("exception")
        previous_hook(tp, value, tb)

    sys.excepthook = excepthook
    if threading.current_thread() is not threading.main_thread():
        return
    previous: dict[int, Any] = {}

    flushing: list[bool] = []

    def handler(signum: int, frame: Any) -> None:
        if flushing:
            return  # a second signal while flushing must not cut the trace short
        session.end.signal = signum
        flushing.append(True)
        try:
            session.flush(f"signal {signum}", from_signal=True)
        finally:
            flushing.clear()
        prev = previous.get(signum)
        if callable(prev):
            prev(signum, frame)  # e.g. SIGINT's default raises KeyboardInterrupt
            return
        if prev == signal.SIG_IGN:
            return
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in _SIGNALS:
        previous[sig] = signal.getsignal(sig)
        signal.signal(sig, handler)
    _start_watcher(session)


def _start_watcher(session: Session) -> None:
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (ValueError, OSError):
        os.close(r)
        os.close(w)
        return
    if old != -1:  # the application owns the wake-up fd: leave it alone
        signal.set_wakeup_fd(old)
        os.close(r)
        os.close(w)
        return

    def watch() -> None:
        while True:
            data = os.read(r, 64)
            sig = next((b for b in data if b in _SIGNALS), None)
            if sig is None:
                continue
            time.sleep(GRACE_S)
            if session.flush_started:
                continue
            session.end.signal = sig
            session.flush(f"signal {sig} (main thread busy)", from_signal=True)
            os._exit(128 + sig)

    threading.Thread(target=watch, name="profplug-signal-watcher", daemon=True).start()
