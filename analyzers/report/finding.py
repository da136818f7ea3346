"""The finding of a run in one sentence, and the run-level warnings of a report.

``headline(ranks, whatif)`` picks the rank where device-wide synchronizes cost the most and
says what they cost per step (or per GPU window without steps):

- with the what-if: what it dropped (by default the synchronizes inside the pipeline
  send/recv, ``whatif.dropset``), the saving of replaying without them (recorded - predicted
  step), split into direct (GPU idle in the dropped synchronizes) and indirect (the rest),
  and the predicted step time with event-based waits and its error band (docs/costs.md);
- without it: the direct cost, and how to get the rest (``profplug whatif``);
- with no device-wide synchronize (or no saving): what the GPU's idle time is mostly.

Times in us with thousands separators; percentages of the rank's step (or window). A
step is the median over the rank's non-outlier steps (``steps.stats``), so one stalled step
does not move the finding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profplug.analyzers.core import classify
from profplug.analyzers.stalls.callsites import UNANNOTATED, display_name
from profplug.analyzers.stalls.gaps import CAUSES
from profplug.analyzers.steps.rule import DEFAULT_STEPS, StepRule
from profplug.analyzers.whatif.peers import PEERS_MISSING

if TYPE_CHECKING:
    from profplug.analyzers.stalls.rank import RankResult
    from profplug.analyzers.whatif.result import RankWhatIf, WhatIfResult

SMALL_PCT = 10.0  # below this share of the step, also say what the idle mostly is
TINY_PCT = 0.5  # below this, the synchronizes cost nothing worth a number
CAUSE_WORDS = {"device_sync": "device-wide synchronizes",
               "event_sync": "host-blocking stream/event waits",
               "host_bound": "host-bound launch gaps",
               "other": "gaps the trace cannot attribute"}
ASK_WHATIF = "run `profplug whatif` (or `report --whatif`) for the indirect cost"


def _us(x: float) -> str:
    return f"{x:,.0f} us"


def _pct(x: float) -> str:
    return f"{x:.0f}%" if abs(x) >= 10 else f"{x:.1f}%"


def _share(x: float, whole: float) -> float:
    return 100.0 * x / whole if whole > 0 else 0.0


def _per_step(r: RankResult) -> tuple[float, dict[str, float], str]:
    """(step or window us, idle by cause per step or window, "step" | "GPU window")."""
    if r.steps is not None and r.steps.n_steps:
        return r.steps.period_us, r.steps.idle_per_step_us, "step"
    return r.total("window_us"), r.idle_by_cause_us(), "GPU window"


def _unit(per: str) -> str:
    return "us/step" if per == "step" else "us"


def _device_calls(r: RankResult) -> int:
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


def _dominant_idle(ranks: list[RankResult]) -> str:
    """What the GPU's time is mostly, on the rank that idles most (no device-sync cost)."""
    r = max(ranks, key=lambda x: x.total("idle_us") / max(x.total("window_us"), 1e-9))
    whole, idle, per = _per_step(r)
    win = r.total("window_us")
    share = _share(r.total("idle_us"), win)
    if share < 5.0:
        gpu = r.gpu_time()
        return (f"rank {r.rank}'s GPU is busy {_pct(100.0 - share)} of its window (compute "
                f"{_pct(_share(gpu.compute_us, win))}, communication "
                f"{_pct(_share(gpu.comm_us, win))})")
    cause = max(CAUSES, key=lambda c: idle.get(c, 0.0))
    return (f"rank {r.rank}'s GPU is idle {_pct(share)} of its window, mostly "
            f"{CAUSE_WORDS[cause]}: {_us(idle[cause])}"
            f"{'/step' if per == 'step' else ''} ({_pct(_share(idle[cause], whole))} of its "
            f"{per})")


def headline(ranks: list[RankResult], whatif: WhatIfResult | None = None) -> str:
    """The run's finding in one sentence (see the module docstring)."""
    gpu = [r for r in ranks if r.has_gpu_work]
    if not gpu:
        return "No GPU work in these traces (no kernels, memcpys or memsets): nothing to attribute."
    if not any(_device_calls(r) for r in gpu):
        return f"No device-wide synchronizes on any rank; {_dominant_idle(gpu)}."
    if whatif is not None and whatif.ranks:
        return _with_whatif(gpu, whatif)
    r = max(gpu, key=lambda x: _per_step(x)[1].get("device_sync", 0.0))
    whole, idle, per = _per_step(r)
    direct = idle.get("device_sync", 0.0)
    site = top_device_site(r)
    at = f" at {site}" if site else ""
    return (f"Device-wide synchronizes cost rank {r.rank} {_us(direct)}"
            f"{'/step' if per == 'step' else ''} directly ({_pct(_share(direct, whole))} "
            f"of its {per}){at}; {ASK_WHATIF}.")


def _subject(res: WhatIfResult) -> str:
    """What the what-if dropped, as the sentence's subject."""
    if res.callsite:
        return f"Device-wide synchronizes at {res.callsite}"
    if res.drop == "policy":
        return "Device-wide synchronizes in the pipeline send/recv"
    if res.drop == "all-sync":
        return "Host-blocking syncs"
    return ("Device-wide synchronizes (all of them: none is in a pipeline send/recv)"
            if res.drop_note else "Device-wide synchronizes")


def _with_whatif(gpu: list[RankResult], res: WhatIfResult) -> str:
    # the rank where the dropped calls left the GPU idle most (measured); on a tie (none
    # measured), the one the replay saves most on
    w: RankWhatIf = max(res.ranks, key=lambda x: (x.direct_us, x.saving_us))
    r = next((x for x in gpu if x.rank == w.rank), None)
    per = "step" if w.basis == "step" else "GPU window"
    unit = _unit(per)
    if w.saving_pct < TINY_PCT and w.direct_us <= TINY_PCT / 100 * w.recorded_us:
        most = (f"under 1 {unit} on every rank" if w.saving_us < 1 else
                f"at most {w.saving_us:,.0f} {unit}, {_pct(w.saving_pct)} of the {per}, on "
                f"rank {w.rank}")
        return (f"{_subject(res)} cost nothing measurable here ({most}); "
                f"{_dominant_idle(gpu)}.")
    site = top_device_site(r) if r is not None else None
    s = finding(res, w, site)
    if w.saving_pct < SMALL_PCT and w.direct_us <= 0:
        s = s[:-1] + f"; {_dominant_idle(gpu)}."
    return s


def finding(res: WhatIfResult, w: RankWhatIf | None = None, site: str | None = None) -> str:
    """The what-if's finding, the same words in report, whatif, compare and the page: what
    was measured (GPU idle in the dropped calls, per step and as a share of the step), then
    the prediction as a prediction with its band for a separate run, then where to measure
    it without a profiler. ``w``: the rank to speak of (default: the most idle measured)."""
    if w is None:
        w = max(res.ranks, key=lambda x: (x.direct_us, x.saving_us))
    per = "step" if w.basis == "step" else "GPU window"
    unit = _unit(per)
    of = f"median step of {w.recorded_us:,.0f} us" if per == "step" else per
    at = f" at {site}" if site else ""
    subject = _subject(res).lower() if res.callsite is None else _subject(res)
    if w.direct_us >= 0.5:
        s = (f"Measured: {subject} left rank {w.rank}'s GPU idle {w.direct_us:,.0f} {unit} "
             f"({_pct(_share(w.direct_us, w.recorded_us))} of its {of}){at}.")
    else:  # no gap starts inside them: what they cost shows only after them
        s = (f"Measured: {subject} left no GPU idle inside them on rank {w.rank} (its "
             f"{of}): the GPU idles after them, waiting for launches.")
    withheld = [x for x in res.warnings if x.startswith(PEERS_MISSING)]
    if withheld:
        return s + (f" Prediction withheld: {PEERS_MISSING} (the replay cannot free the "
                    "waits of ranks it does not see); give every rank's trace, or measure "
                    "with `profplug ab`.")
    band = w.run_band_pct or w.error_band_pct
    speedup = w.recorded_us / w.predicted_us if w.predicted_us > 0 else 0.0
    why = []
    if w.bound_binds:
        why.append("held to the data-flow bound: the hosts' own work sets the step")
    if res.max_model_error_pct > 5.0:
        why.append(f"model error up to {res.max_model_error_pct:.1f}%")
    s += (f" Predicted with event-based waits: {w.predicted_us:,.0f} {unit} ({speedup:.2f}x,"
          f" +-{band:.0f}% for a separate run{'; ' + '; '.join(why) if why else ''}); "
          "`profplug ab` measures it without a profiler.")
    return s


def no_steps_warning(ranks: list[RankResult], rule: StepRule = DEFAULT_STEPS) -> str | None:
    """One line when ranks with GPU work have no steps, with the ways to mark them."""
    missing = [r.rank for r in ranks if r.has_gpu_work and r.steps is None]
    if not missing:
        return None
    who = ("any rank" if len(missing) == sum(r.has_gpu_work for r in ranks)
           else "rank(s) " + ", ".join(map(str, missing)))
    return (f"no steps found on {who} (looked for {rule.describe()}), so times are per GPU "
            "window: name the range that marks a step with --step-range NAME or re:REGEX, "
            "mark steps at capture with `profplug run --step-fn MODULE:FUNCTION`, or wrap "
            "each step in `with profplug.step():`")
