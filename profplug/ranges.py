"""Range names: the contract between the runtime plugin and the analyzer (stdlib only).

Every profplug range lives in the NVTX domain ``DOMAIN`` and, while torch.profiler records,
also appears as a ``record_function`` range of the same name in Kineto traces.

| name | what it covers |
| --- | --- |
| ``profplug.send_to_next_pipeline_rank`` | a whole send (post + wait + sync) |
| ``profplug.recv_from_prev_pipeline_rank_`` | a whole recv (post + wait + sync) |
| ``profplug.broadcast_from_last_pipeline_stage`` | a whole broadcast |
| ``profplug.post`` | posting the NCCL/gloo op (batch_isend_irecv / broadcast) |
| ``profplug.wait`` | ``req.wait()`` |
| ``profplug.sync.device`` | ``torch.cuda.synchronize()`` (policy ``device``) |
| ``profplug.sync.event`` | the event/stream wait (policy ``event``) |
| ``profplug.synchronize <file>:<line> <function>`` | a patched ``torch.cuda.synchronize`` call |
| ``profplug.step`` | one pipeline step (``profplug.step()``) |
| ``profplug.rank <R>`` | an NVTX mark (instant) naming the process's rank |
"""

from __future__ import annotations

DOMAIN = "profplug"
PREFIX = "profplug."

SEND = "profplug.send_to_next_pipeline_rank"
RECV = "profplug.recv_from_prev_pipeline_rank_"
BROADCAST = "profplug.broadcast_from_last_pipeline_stage"
POST = "profplug.post"
WAIT = "profplug.wait"
SYNC_DEVICE = "profplug.sync.device"
SYNC_EVENT = "profplug.sync.event"
SYNCHRONIZE = "profplug.synchronize"  # followed by " <file>:<line> <function>"
STEP = "profplug.step"
RANK_MARK = "profplug.rank"  # followed by " <R>"

# Phase ranges say *what* happens, not *where*: the analyzer names a call site
# "<parent> > <phase>" when the innermost range is one of these.
PHASES = frozenset({POST, WAIT, SYNC_DEVICE, SYNC_EVENT})


def synchronize_range(filename: str, lineno: int, function: str) -> str:
    """The range name for a patched ``torch.cuda.synchronize`` called at file:line."""
    return f"{SYNCHRONIZE} {filename}:{lineno} {function}"


def rank_mark(rank: int) -> str:
    return f"{RANK_MARK} {rank}"


def parse_rank_mark(text: str) -> int | None:
    """``"profplug.rank 3"`` -> 3; anything else -> None."""
    if not text.startswith(RANK_MARK + " "):
        return None
    tail = text[len(RANK_MARK) + 1:].strip()
    # ASCII digits only ("²".isdigit() is true, int("²") fails), and a rank that fits int32
    return int(tail) if tail.isascii() and tail.isdigit() and len(tail) <= 9 else None
