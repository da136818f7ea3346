"""The finding of a run in one sentence, and the run-level warnings of a report.

``headline(ranks, whatif)`` says what device-wide synchronizes cost per step (or per GPU
window without steps), on the rank where they cost the most:

- with the what-if: what it dropped (by default the synchronizes inside the pipeline
  send/recv, ``whatif.dropset``), the GPU idle measured in them, then the pipeline's
  prediction as ``whatif.figures`` makes it (the slowest predicted rank, named, its step,
  the speedup over the run's step, its band for the target it is held against), and the
  warnings that change it; nothing to drop when dropping them moves no step;
- without it: the direct cost, and how to get the rest (``profplug whatif``);
- with no device-wide synchronize (or no saving): what the GPU's idle time is mostly.

Times in us with thousands separators; percentages of the rank's step (or window). A
step is the median over the rank's non-outlier steps (``steps.stats``), so one stalled step
does not move the finding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profplug.analyzers.core import classify
from profplug.analyzers.core.vocabulary import Basis, SyncKind
from profplug.analyzers.stalls.callsites import UNANNOTATED, display_name
from profplug.analyzers.stalls.gaps import CAUSES
from profplug.analyzers.steps.rule import DEFAULT_STEPS, StepRule
from profplug.analyzers.whatif import figures
from profplug.analyzers.whatif.peers import PEERS_MISSING

if TYPE_CHECKING:
    from profplug.analyzers.stalls.rank import RankResult
    from profplug.analyzers.whatif.result import WhatIfResult

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
    return sum(s.count for s in r.syncs if s.kind == SyncKind.DEVICE)


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
    pred = figures.prediction(res)
    if pred is None:  # dropping the calls changed no step
        return f"{nothing_to_drop(res)}; {_dominant_idle(gpu)}."
    r = next((x for x in gpu if x.rank == pred.idle_rank), None)
    site = top_device_site(r) if r is not None else None
    s = finding(res, site=site)
    w = res.rank(pred.rank)
    if w.saving_pct < SMALL_PCT and pred.direct_us <= 0:
        s = s[:-1] + f"; {_dominant_idle(gpu)}."
    return s


def nothing_to_drop(res: WhatIfResult) -> str:
    """The sentence of a what-if whose dropped calls change no step (no prediction)."""
    w = figures.idle_rank(res)
    most = ("" if w is None or w.direct_us < 0.5 else
            f": rank {w.rank}'s GPU idles {w.direct_us:,.0f} us/step in them")
    return (f"{_subject(res)}: dropping them changes no step in the replay{most}; nothing to "
            "drop, so no speedup is predicted")


def finding(res: WhatIfResult, site: str | None = None,
            target: figures.Target | None = None) -> str:
    """The what-if's finding, the same words in report, whatif, compare and the page: what
    was measured (GPU idle in the dropped calls on the rank where it is largest, per step
    and as a share of that rank's traced step), then the pipeline's prediction (its rank,
    the largest predicted step: ``whatif.figures``) with its band for ``target`` (default:
    the what-if's own), the caveats that change it, and where to measure it without a
    profiler."""
    pred = figures.prediction(res, target)
    if pred is None:
        return nothing_to_drop(res) + "."
    per = "step" if pred.basis == Basis.STEP else "GPU window"
    unit = _unit(per)
    cal = pred.calibrated
    of = (f"{'traced ' if cal else ''}median step of {pred.idle_step_us:,.0f} us"
          if per == "step" else per)
    at = f" at {site}" if site else ""
    subject = _subject(res).lower() if res.callsite is None else _subject(res)
    if pred.direct_us >= 0.5:
        s = (f"Measured{' in the trace' if cal else ''}: {subject} left rank "
             f"{pred.idle_rank}'s GPU idle {pred.direct_us:,.0f} {unit} "
             f"({_pct(_share(pred.direct_us, pred.idle_step_us))} of its {of}){at}.")
    else:  # no gap starts inside them: what they cost shows only after them
        s = (f"Measured: {subject} left no GPU idle inside them (rank {pred.idle_rank}'s "
             f"{of}): the GPU idles after them, waiting for launches.")
    if pred.withheld:
        return s + (f" Prediction withheld: {PEERS_MISSING} (the replay cannot free the "
                    "waits of ranks it does not see); give every rank's trace, or measure "
                    "with `profplug ab`.")
    why = []
    if res.rank(pred.rank).bound_binds:
        why.append("held to the data-flow bound: the hosts' own work sets the step")
    if res.max_model_error_pct > 5.0:
        why.append(f"model error up to {res.max_model_error_pct:.1f}%")
    speedup = pred.speedup or 0.0
    base = (f"the given unprofiled step of {pred.run_step_us:,.1f} us" if cal
            else "the run's step")
    on = f" on rank {pred.rank}, the slowest" if pred.n_ranks > 1 else ""
    s += (f" Predicted with event-based waits: {pred.predicted_us:,.0f} {unit}{on} "
          f"({speedup:.2f}x {base}; +-{pred.band_pct:.0f}% for "
          f"{pred.target_words}{'; ' + '; '.join(why) if why else ''})")
    for c in pred.caveats:
        s += f"; warning: {c}"
    return s + ("." if cal else "; `profplug ab` measures it without a profiler.")


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
