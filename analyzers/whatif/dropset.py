"""Which top-level calls the what-if's prediction drops (makes non-blocking), given a
``DropSpec``: the one place that chooses the drop set.

``device-sync`` (the default): every device-wide synchronize; ``all-sync``: every
host-blocking call (stream/event synchronizes and blocking copies too); ``none``: nothing
(the replay as recorded, used by ``--unprofiled``'s calibration). ``callsite`` narrows any of
them to the calls at one call site (``callsites.enclosing`` label, ``--drop-at``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import classify
from ..callsites import enclosing
from ..timeline import Timeline

DROP_DEVICE, DROP_ALL = "device-sync", "all-sync"
DROP_NONE = "none"  # nothing dropped: the replay as recorded (``--unprofiled`` calibration)


@dataclass
class DropSpec:
    """Which host-blocking calls the replay makes non-blocking."""

    kinds: str = DROP_DEVICE  # device-sync: device-wide; all-sync: every blocking call; none
    callsite: str | None = None  # only calls at this call site (callsites.enclosing label)


def dropped_calls(tl: Timeline, kind: np.ndarray, blocking: np.ndarray, drop: DropSpec
                  ) -> np.ndarray:
    """Per API call of ``tl``: True when the prediction drops it. ``kind``: each call's
    ``classify`` kind; ``blocking``: the top-level calls the model makes wait (host-blocking
    synchronizes and blocking copies); only those can be dropped."""
    if drop.kinds == DROP_NONE:
        return np.zeros(blocking.size, dtype=bool)
    cand = blocking & (kind == classify.DEVICE) if drop.kinds == DROP_DEVICE else blocking.copy()
    if drop.callsite is not None and cand.any():
        idx = np.nonzero(cand)[0]
        labels = enclosing(tl, tl.api_start_ns[idx], tl.api_end_ns[idx], tl.api_tid[idx])
        cand[idx[np.array([lab != drop.callsite for lab in labels], dtype=bool)]] = False
    return cand
