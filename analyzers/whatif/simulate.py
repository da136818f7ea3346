"""The discrete-event replay of a :class:`~.model.Model` (all times int64 ns).

Every host thread and every GPU stream is an agent that advances through its own sequence
as far as its dependencies allow (a blocking call needs the ends of the ops it waits for; an
op needs its launching call's start, the ends of the ops before it and, for a paired NCCL
kernel, the peer's start). Agents are swept in turn until all are done: each item is
resolved once, so the cost is linear in events plus one sweep per cross-agent hand-off.
If a sweep makes no progress (a pairing the trace contradicts), the earliest stuck NCCL
kernel falls back to its recorded duration and a warning says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .model import Model


@dataclass
class Replay:
    """Replayed start/end ns per API call (``a_*``) and per GPU op (``o_*``)."""

    a_start: np.ndarray
    a_end: np.ndarray
    o_start: np.ndarray
    o_end: np.ndarray
    sweeps: int
    warnings: list[str] = field(default_factory=list)


def replay(m: Model, drop: bool) -> Replay:
    """Replay the model; ``drop``: the model's dropped calls do not wait."""
    n_a, n_o = int(m.a_start.size), int(m.o_start.size)
    a_s: list[int | None] = [None] * n_a
    a_e: list[int | None] = [None] * n_a
    o_s: list[int | None] = [None] * n_o
    o_e: list[int | None] = [None] * n_o
    gap, base, wake, omin = ((m.a_gap_drop if drop else m.a_gap).tolist(), m.a_base.tolist(),
                             m.a_wake.tolist(), m.a_omin.tolist())
    rec_s, dur = m.a_start.tolist(), m.a_dur.tolist()
    dropped = m.a_dropped.tolist() if drop else [False] * n_a
    wait = m.a_wait
    o_top, o_off, o_lat, o_gap = (m.o_top.tolist(), m.o_off.tolist(), m.o_lat.tolist(),
                                  m.o_gap.tolist())
    o_dur = (m.o_end - m.o_start).tolist()
    peer, xfer, clock = m.o_peer.tolist(), m.o_xfer.tolist(), m.o_clock.tolist()
    deps = m.o_deps
    forced: set[int] = set()
    t_ptr = [0] * len(m.threads)
    t_last: list[int] = [0] * len(m.threads)
    s_ptr = [0] * len(m.streams)
    s_last: list[int | None] = [None] * len(m.streams)
    warnings: list[str] = []
    remaining = len(m.threads) + len(m.streams)
    done_t = [not seq for seq in m.threads]
    done_s = [not seq for seq in m.streams]
    remaining -= sum(done_t) + sum(done_s)
    sweeps = 0
    while remaining:
        sweeps += 1
        progress = False
        for ti, seq in enumerate(m.threads):
            if done_t[ti]:
                continue
            p, t, n = t_ptr[ti], t_last[ti], len(seq)
            while p < n:
                i = seq[p]
                s = a_s[i]
                if s is None:
                    s = t + gap[i] if p else rec_s[i]
                    a_s[i] = s
                if dropped[i]:
                    e = s + omin[i]
                else:
                    w = wait.get(i)
                    if w is None:
                        e = s + dur[i]
                    else:
                        d = -1
                        for k in w:
                            ek = o_e[k]
                            if ek is None:
                                d = None
                                break
                            if ek > d:
                                d = ek
                        if d is None:
                            break
                        e = max(s + base[i], d + wake[i])
                a_e[i] = e
                t = e
                p += 1
            if p != t_ptr[ti]:
                progress = True
            t_ptr[ti], t_last[ti] = p, t
            if p == n:
                done_t[ti] = True
                remaining -= 1
        for si, seq in enumerate(m.streams):
            if done_s[si]:
                continue
            p, prev, n = s_ptr[si], s_last[si], len(seq)
            while p < n:
                j = seq[p]
                st = o_s[j]
                if st is None:
                    a = o_top[j]
                    if a >= 0:
                        la = a_s[a]
                        if la is None:
                            break
                        st = la + o_off[j] + o_lat[j]
                    else:
                        st = o_off[j] + o_lat[j]
                    ready = prev
                    dl = deps.get(j)
                    if dl is not None:
                        blocked = False
                        for k in dl:
                            ek = o_e[k]
                            if ek is None:
                                blocked = True
                                break
                            if ready is None or ek > ready:
                                ready = ek
                        if blocked:
                            break
                    if ready is not None and ready + o_gap[j] > st:
                        st = ready + o_gap[j]
                    o_s[j] = st
                q = peer[j]
                if q >= 0 and j not in forced:
                    sq = o_s[q]
                    if sq is None:
                        break
                    sq -= clock[j]
                    e = (st if st > sq else sq) + xfer[j]
                else:
                    e = st + o_dur[j]
                o_e[j] = e
                prev = e
                p += 1
            if p != s_ptr[si]:
                progress = True
            s_ptr[si], s_last[si] = p, prev
            if p == n:
                done_s[si] = True
                remaining -= 1
        if remaining and not progress:
            stuck = [m.streams[si][s_ptr[si]] for si in range(len(m.streams))
                     if not done_s[si] and o_s[m.streams[si][s_ptr[si]]] is not None
                     and peer[m.streams[si][s_ptr[si]]] >= 0]
            if not stuck:
                raise RuntimeError("replay made no progress (inconsistent model)")
            j = min(stuck, key=lambda x: o_s[x])  # type: ignore[arg-type, return-value]
            forced.add(j)
            warnings.append(f"NCCL kernel {j}: its paired kernel never started in the replay; "
                            "recorded duration used")
    return Replay(np.array(a_s, dtype=np.int64), np.array(a_e, dtype=np.int64),
                  np.array(o_s, dtype=np.int64), np.array(o_e, dtype=np.int64), sweeps,
                  warnings)


def nested_times(m: Model, r: Replay) -> tuple[np.ndarray, np.ndarray]:
    """Replayed start/end of every call, nested ones moved with their top-level call."""
    shift = r.a_start[m.a_top] - m.a_start[m.a_top]
    top = m.a_top == np.arange(m.a_top.size)
    s = np.where(top, r.a_start, m.a_start + shift)
    e = np.where(top, r.a_end, np.minimum(m.a_end + shift, r.a_end[m.a_top]))
    return s, np.maximum(e, s)
