"""The predicted run's host costs relative to the traced run's (``HostCosts``).

Applied to the model of the prediction only (``whatif(..., host=...)``): ``unprofiled``
calibrates it on an unprofiled run's step, ``benchmarks/grid_table.py`` on an event run's
host speed. Kept apart from ``host`` (which ``model`` imports) because it transforms a built
``Model``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .model import Model


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
            return m
        g, c = self._factors(m.a_rank, 0), self._factors(m.a_rank, 1)

        def mul(x: np.ndarray, f: np.ndarray | float) -> np.ndarray:
            return np.rint(x * f).astype(np.int64)

        linked = m.o_top >= 0  # an unlinked op's o_off is its recorded start: kept
        return replace(m, a_gap=mul(m.a_gap, g), a_gap_drop=mul(m.a_gap_drop, g),
                       a_dur=mul(m.a_dur, c), a_base=mul(m.a_base, c),
                       a_omin=mul(m.a_omin, c),
                       o_off=np.where(linked, mul(m.o_off, self._factors(m.o_rank, 1)),
                                      m.o_off))
