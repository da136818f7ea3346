"""Pipeline bubbles: NCCL time split into transfer and peer wait, per rank and per step.

A NCCL kernel runs from the moment its rank reaches the send/recv/collective, but it can
only move data once its peers have started their matching kernels. With the kernels matched
across ranks (``matching``) and the clocks aligned, each matched kernel [s, e) splits at
``w`` = the latest start among its partners (on this rank's clock):

- peer wait [s, w) when s < w < e (the kernel started first and waited for the peer);
- transfer [w, e) (all of [s, e) when it started last, or when its peers started only after
  it ended: an eager send that completed without waiting);

unmatched kernels count as transfer (nothing says what they waited for; reported apart).
Per device, ``comm`` = time with >= 1 NCCL kernel running (as in the stall report),
``transfer`` = time with >= 1 kernel in its transfer part, ``wait`` = comm - transfer (every
running NCCL kernel only waited); summed over the rank's devices. The **bubble** of a rank is
``idle + wait``: the time its GPU did nothing useful. Per step, the same in each complete
step's span (``steps.step_spans``: first op of the step to the next step's first op), the
idle and NCCL time clipped to the span. ``waits_for``: each kernel's wait, charged to the rank
of the partner it waited for (kernel time, so overlapping kernels may add up to more than
``wait``). All times int64 ns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from profplug.analyzers.core.timeline import Timeline, groups
from profplug.analyzers.graph.matching import Matching
from profplug.analyzers.stalls.gaps import Spans, device_intervals
from profplug.analyzers.stalls.intervals import difference, union, within
from profplug.analyzers.stalls.per_step import StepSpans

NONE = np.iinfo(np.int64).min


@dataclass
class Binding:
    """Per GPU op of one rank: the partner it waited for last (from the matching)."""

    pos: np.ndarray  # partner's timeline position, -1 none
    op: np.ndarray  # partner's GPU op index, -1 none
    start: np.ndarray  # partner's start on this rank's clock, NONE when unmatched


@dataclass
class StepBubbles:
    """Per complete step of one rank (ns arrays, in step order)."""

    step_numbers: list[int]
    idle_ns: np.ndarray
    comm_ns: np.ndarray
    transfer_ns: np.ndarray
    wait_ns: np.ndarray

    @property
    def bubble_ns(self) -> np.ndarray:
        total: np.ndarray = self.idle_ns + self.wait_ns
        return total


@dataclass
class RankBubbles:
    """One rank's bubble (ns). Per NCCL kernel (``kernels``, GPU op indices): where its wait
    ends (``wait_end``, its start when it did not wait) and whether it has partners."""

    rank: int
    match_rule: str
    window_ns: int
    idle_ns: int
    comm_ns: int
    transfer_ns: int
    wait_ns: int
    unmatched_ns: int  # NCCL time of kernels without a partner (inside transfer)
    waits_for_ns: dict[int, int]
    steps: StepBubbles | None
    kernels: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    wait_end: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    matched: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    waits: Spans = field(default_factory=Spans.empty)  # the wait: comm less transfer, per device

    @property
    def bubble_ns(self) -> int:
        return self.idle_ns + self.wait_ns


def rank_bubbles(tl: Timeline, pos: int, m: Matching, b: Binding, spans: StepSpans,
                 rule: str | None = None) -> RankBubbles:
    """The bubble of the rank at timeline position ``pos`` (see the module docstring);
    ``rule``: ``m.rank_rule(pos)``, when the caller has it (``m`` without the edges)."""
    k = m.comm_ops[pos]
    s, e = tl.gpu_start_ns[k], tl.gpu_end_ns[k]
    ps = b.start[k]
    matched = b.op[k] >= 0
    w = np.where(matched & (ps > s) & (ps < e), ps, s)
    waits_for: dict[int, int] = {}
    waited = w > s
    for p, d in zip(b.pos[k][waited].tolist(), (w - s)[waited].tolist(), strict=True):
        r = m.ranks[p]
        waits_for[r] = waits_for.get(r, 0) + int(d)
    dev_k = tl.gpu_device[k]
    window = idle = comm = xfer = unm = 0
    n_steps = spans.span_s.size
    st = [np.zeros(n_steps, dtype=np.int64) for _ in range(3)]  # idle, comm, transfer
    of_dev = dict(groups(dev_k))  # one sort each: linear however many devices
    none = np.zeros(0, dtype=np.int64)
    wait_parts: list[tuple[int, np.ndarray, np.ndarray]] = []
    for dev, sel in groups(tl.gpu_device):
        iv = device_intervals(tl.gpu_start_ns[sel], tl.gpu_end_ns[sel])
        window += iv.window_ns
        idle += iv.window_ns - iv.busy_ns
        on = of_dev.get(dev, none)
        cs, ce = union(s[on], e[on])
        ts, te = union(w[on], e[on])
        comm += int((ce - cs).sum())
        xfer += int((te - ts).sum())
        wait_parts.append((dev, *difference(cs, ce, ts, te)))
        un = on[~matched[on]]
        us_, ue_ = union(s[un], e[un])
        unm += int((ue_ - us_).sum())
        if n_steps:
            st[0] += iv.idle_within(spans.span_s, spans.span_e)
            st[1] += within(cs, ce, spans.span_s, spans.span_e)
            st[2] += within(ts, te, spans.span_s, spans.span_e)
    steps = None
    if n_steps:
        steps = StepBubbles([int(x) for x in tl.step_num[spans.rows]], st[0], st[1], st[2],
                            st[1] - st[2])
    return RankBubbles(tl.rank, m.rank_rule(pos) if rule is None else rule, window, idle, comm, xfer, comm - xfer, unm,
                       dict(sorted(waits_for.items())), steps, k, w, matched,
                       Spans.join(wait_parts))
