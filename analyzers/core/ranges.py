"""Range names: the contract between the runtime plugin and the analyzer (stdlib only).

Every profplug range lives in the NVTX domain ``DOMAIN`` and, while torch.profiler records,
also appears as a ``record_function`` range of the same name in Kineto traces.

| name | what it covers |
| --- | --- |
| ``profplug.send_to_next_pipeline_rank peer=<R>`` | a whole send (post + wait + sync) to global rank R |
| ``profplug.recv_from_prev_pipeline_rank_ peer=<R>`` | a whole recv (post + wait + sync) from global rank R |
| ``profplug.broadcast_from_last_pipeline_stage root=<R> group=<r0>,<r1>,...`` | a whole broadcast from global rank R over the group's global ranks |
| ``profplug.post`` | posting the NCCL/gloo op (batch_isend_irecv / broadcast) |
| ``profplug.wait`` | ``req.wait()`` |
| ``profplug.sync.device`` | ``torch.cuda.synchronize()`` (policy ``device``) |
| ``profplug.sync.event`` | the event/stream wait (policy ``event``) |
| ``profplug.synchronize <file>:<line> <function>`` | a patched ``torch.cuda.synchronize`` call |
| ``profplug.sync_site <MODULE>:<QUALNAME>`` | a call of a declared sync site (``--sync-site``); its synchronizes are the policy's |
| ``profplug.step`` | one pipeline step (``profplug.step()``, a ``--step-fn`` or Megatron's ``run_one_forward_step``) |
| ``ProfilerStep#<N>`` | the same step N, Kineto only (the name torch.profiler and HTA use); encloses ``profplug.step`` |
| ``profplug.rank <R>`` | an NVTX mark (instant) naming the process's rank |

**Payload in the name.** torch.profiler's record_function ranges carry only a name in the
Kineto trace (torch 2.13 drops a record_function's ``args`` string from the Chrome trace), so
the communication ranges carry their peer in the name itself, the same in Kineto and NVTX:
``<name>( <key>=<value>)*`` with keys ``peer`` (global rank of the other side of a send or
recv), ``root`` (global rank a broadcast comes from) and ``group`` (the group's global ranks,
comma separated); values are decimal integers. :func:`split_payload` parses it;
:func:`without_payload` gives the bare name (call sites use it, so they stay one per range
whatever the peer). Traces captured before the payload existed have bare names; the analyzer
then falls back to the rules it states (docs/crossrank.md). The NVTX numeric payload of these
ranges stays the message size in bytes.
"""

from __future__ import annotations

import re
from functools import lru_cache

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
SYNC_SITE = "profplug.sync_site"  # followed by " <MODULE>:<QUALNAME>"
STEP = "profplug.step"
PROFILER_STEP = "ProfilerStep#"  # followed by the step index (Kineto only)
RANK_MARK = "profplug.rank"  # followed by " <R>"

# Phase ranges say *what* happens, not *where*: the analyzer names a call site
# "<parent> > <phase>" when the innermost range is one of these.
PHASES = frozenset({POST, WAIT, SYNC_DEVICE, SYNC_EVENT})


def synchronize_range(filename: str, lineno: int, function: str) -> str:
    """The range name for a patched ``torch.cuda.synchronize`` called at file:line."""
    return f"{SYNCHRONIZE} {filename}:{lineno} {function}"


def sync_site_range(target: str) -> str:
    """The range name for a call of the declared sync site ``MODULE:QUALNAME``."""
    return f"{SYNC_SITE} {target}"


def profiler_step(index: int) -> str:
    """torch.profiler's name for step ``index``: ``"ProfilerStep#7"``."""
    return f"{PROFILER_STEP}{index}"


def rank_mark(rank: int) -> str:
    return f"{RANK_MARK} {rank}"


def parse_rank_mark(text: str) -> int | None:
    """``"profplug.rank 3"`` -> 3; anything else -> None."""
    if not text.startswith(RANK_MARK + " "):
        return None
    tail = text[len(RANK_MARK) + 1:].strip()
    # ASCII digits only ("²".isdigit() is true, int("²") fails), and a rank that fits int32
    return int(tail) if tail.isascii() and tail.isdigit() and len(tail) <= 9 else None


# ASCII digits, a rank that fits int32 (a longer number is no payload: the name stays whole)
_PAYLOAD = re.compile(r" (peer|root|group)=(-?[0-9]{1,9}(?:,-?[0-9]{1,9})*)(?![0-9,])")


def p2p_range(name: str, peer: int) -> str:
    """``"profplug.send_to_next_pipeline_rank peer=1"``: a send/recv range with its peer."""
    return f"{name} peer={peer}"


def broadcast_range(root: int, group: tuple[int, ...] | list[int] | None) -> str:
    """The broadcast range with its root and, when known, its group's global ranks."""
    tail = f" group={','.join(map(str, group))}" if group else ""
    return f"{BROADCAST} root={root}{tail}"


def split_payload(name: str) -> tuple[str, dict[str, tuple[int, ...]]]:
    """``"profplug.broadcast_from_last_pipeline_stage root=1 group=0,1"`` ->
    ``("profplug.broadcast_from_last_pipeline_stage", {"root": (1,), "group": (0, 1)})``.

    Names without a payload (or not profplug's) come back whole, with an empty dict.
    """
    if not name.startswith(PREFIX) or "=" not in name:
        return name, {}
    fields = {k: tuple(int(x) for x in v.split(",")) for k, v in _PAYLOAD.findall(name)}
    return (_PAYLOAD.sub("", name) if fields else name), fields


@lru_cache(maxsize=4096)  # once per distinct range name
def without_payload(name: str) -> str:
    """The range name without its ``key=value`` payload (see :func:`split_payload`)."""
    return split_payload(name)[0]
