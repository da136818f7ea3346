"""The words of a rank's figures in a finding (``report.finding``, ``whatif.finding``): times
in us with thousands separators, percentages of the rank's step (or window), what its idle
mostly is, where its device-wide synchronizes cost the most. A step is the median over the
rank's non-outlier steps (``steps.stats``), so one stalled step does not move a finding."""

from __future__ import annotations

from types import MappingProxyType

from profplug.analyzers.core import classify
from profplug.analyzers.stalls.callsites import UNANNOTATED, display_name
from profplug.analyzers.stalls.gaps import CAUSES
from profplug.analyzers.stalls.rank import RankResult

SMALL_PCT = 10.0  # below this share of the step, also say what the idle mostly is
TINY_PCT = 0.5  # below this, the synchronizes cost nothing worth a number
CAUSE_WORDS = MappingProxyType({
    "device_sync": "device-wide synchronizes",
    "event_sync": "host-blocking stream/event waits",
    "host_bound": "host-bound launch gaps",
    "other": "gaps the trace cannot attribute",
})
ASK_WHATIF = "run `profplug whatif` (or `report --whatif`) for the indirect cost"


def us_text(x: float) -> str:
    return f"{x:,.0f} us"


def pct_text(x: float) -> str:
    return f"{x:.0f}%" if abs(x) >= 10 else f"{x:.1f}%"


def share_pct(x: float, whole: float) -> float:
    return 100.0 * x / whole if whole > 0 else 0.0


def per_step(r: RankResult) -> tuple[float, dict[str, float], str]:
    """(step or window us, idle by cause per step or window, "step" | "GPU window")."""
    if r.steps is not None and r.steps.n_steps:
        return r.steps.period_us, r.steps.idle_per_step_us, "step"
    return r.total("window_us"), r.idle_by_cause_us(), "GPU window"


def unit_of(per: str) -> str:
    return "us/step" if per == "step" else "us"


def device_calls(r: RankResult) -> int:
    return sum(s.count for s in r.syncs if s.kind == "device")


def top_device_site(r: RankResult) -> str | None:
    """The call site of device-wide synchronizes that caused the most idle (display name)."""
    sites = [c for c in r.callsites if classify.sync_kind(c.api) == classify.DEVICE]
    if not sites:
        return None
    best = max(sites, key=lambda c: (c.idle_caused_us, c.count))
    if best.idle_caused_us <= 0:
        return None
    return "unannotated calls" if best.callsite == UNANNOTATED else display_name(best.callsite)


def dominant_idle(ranks: list[RankResult]) -> str:
    """What the GPU's time is mostly, on the rank that idles most (no device-sync cost)."""
    r = max(ranks, key=lambda x: x.total("idle_us") / max(x.total("window_us"), 1e-9))
    whole, idle, per = per_step(r)
    win = r.total("window_us")
    share = share_pct(r.total("idle_us"), win)
    if share < 5.0:
        gpu = r.gpu_time()
        return (
            f"rank {r.rank}'s GPU is busy {pct_text(100.0 - share)} of its window (compute "
            f"{pct_text(share_pct(gpu.compute_us, win))}, communication "
            f"{pct_text(share_pct(gpu.comm_us, win))})"
        )
    cause = max(CAUSES, key=lambda c: idle.get(c, 0.0))
    return (
        f"rank {r.rank}'s GPU is idle {pct_text(share)} of its window, mostly "
        f"{CAUSE_WORDS[cause]}: {us_text(idle[cause])}"
        f"{'/step' if per == 'step' else ''} ({pct_text(share_pct(idle[cause], whole))} of its "
        f"{per})"
    )
