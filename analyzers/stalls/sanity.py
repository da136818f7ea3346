"""The report's own arithmetic, checked before anything is printed.

Per device: 0 <= busy <= window, busy + idle = window, compute + comm = busy, and the idle
causes (each >= 0) add up to idle. Times come from integer nanoseconds, so a break means
the input defeated the reader's range checks (or a hand-made timeline did): the report is
refused with a one-line error naming the rank's files, never printed wrong.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from profplug.analyzers.core.errors import TraceError
from profplug.analyzers.stalls.rank import RankResult

TOLERANCE_US = 0.01  # the per-device figures are rounded to 1 ns each


def sum_rule_broken(r: RankResult) -> str | None:
    """What breaks the sum rule on one rank, or None."""
    for d in r.devices:
        causes, g = d.idle_by_cause_us, d.gpu
        neg = -TOLERANCE_US
        tol = TOLERANCE_US + 8 * math.ulp(abs(g.window_us))  # float rounding of sums
        checks = (
            (g.window_us >= 0 and g.busy_us >= neg and g.idle_us >= neg,
             f"a negative window, busy or idle time ({g.window_us}, {g.busy_us}, {g.idle_us})"),
            (g.busy_us <= g.window_us + tol, f"busy {g.busy_us} us > window {g.window_us} us"),
            (abs(g.busy_us + g.idle_us - g.window_us) <= tol, "busy + idle != window"),
            (abs(g.compute_us + g.comm_us - g.busy_us) <= tol, "compute + comm != busy"),
            (all(v >= neg for v in causes.values()),
             "a negative idle cause (" + ", ".join(f"{k} {v}" for k, v in causes.items()) + ")"),
            (abs(sum(causes.values()) - g.idle_us) <= tol, "idle causes do not add up to idle"),
        )
        for ok, what in checks:
            if not ok:
                return f"device {d.device}: {what}"
    return None


def check_sum_rule(ranks: Iterable[RankResult]) -> None:
    """Raise TraceError for the first rank whose figures break the sum rule."""
    for r in ranks:
        why = sum_rule_broken(r)
        if why is not None:
            raise TraceError(f"{', '.join(r.files)}: rank {r.rank}: the analysis does not add "
                             f"up ({why}); the trace's times are inconsistent, no report made")
