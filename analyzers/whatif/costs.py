"""The predicted run's host costs relative to the traced run's (``HostCosts``).

Applied to the model of the prediction only (``whatif(..., host=...)``): ``unprofiled``
calibrates it on an unprofiled run's step, ``benchmarks/grid_table.py`` on an event run's
host speed. Kept apart from ``host`` (which ``model`` imports) because it transforms a built
``Model``.

What the profiler changes on the GPU side: a NCCL kernel's duration includes waiting for
its peer. A kernel paired across ranks (``pairs``) gets its wait from the replay; an unpaired
one keeps its recorded duration, so under a profiled, slower peer its wait would be kept as
GPU work. ``comm_floors`` gives each unpaired NCCL kernel its floor, the shortest duration of
a kernel of that name on that rank (the transfer itself, with the least waiting), and
``HostCosts.comm_floor_ns`` scales the rest, the wait, like the host it waited for:
``floor + (duration - floor) * gap_scale``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
from profplug.analyzers.core import classify
from profplug.analyzers.core.memo import Memo

if TYPE_CHECKING:
    from profplug.analyzers.core.timeline import Timeline
    from profplug.analyzers.graph.model import Model


@dataclass(frozen=True)
class HostCosts:
    """The predicted run's host costs relative to the traced run's.

    The replay as recorded always uses the traced costs; only the prediction is adjusted.
    ``gap_scale`` multiplies the host time between CUDA calls (Python, the framework),
    ``call_scale`` the time inside calls that do not wait (launches, records, the
    non-blocking part of a synchronize); ``ranks`` overrides both per rank. Used to compare a
    prediction with a run whose host was faster or slower (``benchmarks/grid_table.py``).
    """

    gap_scale: float = 1.0
    call_scale: float = 1.0
    ranks: Mapping[int, tuple[float, float]] = field(default_factory=dict)
    # per GPU op of the model (``comm_floors``): a NCCL kernel's floor in ns, -1 for others
    comm_floor_ns: np.ndarray | None = field(default=None, compare=False)

    def _factors(self, rank: np.ndarray, which: int) -> np.ndarray | float:
        dflt = (self.gap_scale, self.call_scale)[which]
        if not self.ranks:
            return dflt
        f = np.full(rank.size, dflt, dtype=np.float64)
        for r, pair in self.ranks.items():
            f[rank == r] = pair[which]
        return f

    def apply(self, m: Model) -> Model:
        """``m`` with its host costs adjusted (the recorded times stay)."""
        if self.gap_scale == self.call_scale == 1.0 and not self.ranks:
            return m  # the floors scale nothing at 1.0
        g, c = self._factors(m.a_rank, 0), self._factors(m.a_rank, 1)

        def mul(x: np.ndarray, f: np.ndarray | float) -> np.ndarray:
            return np.rint(x * f).astype(np.int64)

        linked = m.o_top >= 0  # an unlinked op's o_off is its recorded start: kept
        o_end = m.o_end
        f = self.comm_floor_ns
        if f is not None and f.size == m.o_end.size:
            dur = m.o_end - m.o_start
            wait = np.maximum(dur - f, 0)
            scaled = m.o_start + np.minimum(dur, f + mul(wait, self._factors(m.o_rank, 0)))
            o_end = np.where((f >= 0) & (m.o_peer < 0), scaled, m.o_end)
        return replace(m, a_gap=mul(m.a_gap, g), a_gap_drop=mul(m.a_gap_drop, g),
                       a_dur=mul(m.a_dur, c), a_base=mul(m.a_base, c),
                       a_omin=mul(m.a_omin, c),
                       o_off=np.where(linked, mul(m.o_off, self._factors(m.o_rank, 1)),
                                      m.o_off), o_end=o_end)


def comm_floors(timelines: list[Timeline], memo: Memo | None = None) -> np.ndarray:
    """Per GPU op of the run, in the model's order (timelines in order, each one's ops as
    stored): a NCCL kernel's floor (the shortest duration of a kernel of its name on its
    rank, ns), -1 for every other op."""
    parts = []
    for tl in timelines:
        out = np.full(tl.n_gpu, -1, dtype=np.int64)
        comm = classify.comm_for_symbols(tl.names, memo)[tl.gpu_name] if tl.n_gpu else out >= 0
        idx = np.nonzero(comm)[0]
        if idx.size:
            dur = (tl.gpu_end_ns - tl.gpu_start_ns)[idx]
            names = tl.gpu_name[idx]
            floor = {int(n): int(dur[names == n].min()) for n in np.unique(names)}
            out[idx] = [floor[int(n)] for n in names]
        parts.append(out)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
