"""The what-if's finding, the same words in report, whatif, compare and the page
(:func:`finding`), and its say in a report's finding line (:func:`whatif_headline`, given
to the what-if's spec): what it dropped (by default the synchronizes inside the pipeline
send/recv, ``graph.dropset``), the GPU idle measured in them, then the pipeline's prediction
as ``whatif.figures`` makes it (the slowest predicted rank, named, its step, the speedup over
the run's step, its band for the target it is held against), and the warnings that change
it; nothing to drop when dropping them moves no step."""

from __future__ import annotations

from profplug.analyzers.stalls.phrases import (
    SMALL_PCT,
    dominant_idle,
    pct_text,
    share_pct,
    top_device_site,
    unit_of,
)
from profplug.analyzers.stalls.rank import RankResult
from profplug.analyzers.whatif import figures
from profplug.analyzers.whatif.peers import PEERS_MISSING
from profplug.analyzers.whatif.result import WhatIfResult


def whatif_headline(gpu: list[RankResult], res: WhatIfResult) -> str | None:
    """The report's finding with the what-if (``gpu``: the ranks with GPU work, some with
    device-wide synchronizes); None when it replayed no rank."""
    return _with_whatif(gpu, res) if res.ranks else None


def _subject(res: WhatIfResult) -> str:
    """What the what-if dropped, as the sentence's subject."""
    if res.callsite:
        return f"Device-wide synchronizes at {res.callsite}"
    if res.drop == "policy":
        return "Device-wide synchronizes in the pipeline send/recv"
    if res.drop == "all-sync":
        return "Host-blocking syncs"
    return (
        "Device-wide synchronizes (all of them: none is in a pipeline send/recv)"
        if res.drop_note
        else "Device-wide synchronizes"
    )


def _with_whatif(gpu: list[RankResult], res: WhatIfResult) -> str:
    pred = figures.prediction(res)
    if pred is None:  # dropping the calls changed no step
        return f"{nothing_to_drop(res)}; {dominant_idle(gpu)}."
    r = next((x for x in gpu if x.rank == pred.idle_rank), None)
    site = top_device_site(r) if r is not None else None
    s = finding(res, site=site)
    w = res.rank(pred.rank)
    if w.saving_pct < SMALL_PCT and pred.direct_us <= 0:
        s = s[:-1] + f"; {dominant_idle(gpu)}."
    return s


def nothing_to_drop(res: WhatIfResult) -> str:
    """The sentence of a what-if whose dropped calls change no step (no prediction)."""
    w = figures.idle_rank(res)
    most = (
        ""
        if w is None or w.direct_us < 0.5
        else f": rank {w.rank}'s GPU idles {w.direct_us:,.0f} us/step in them"
    )
    return (
        f"{_subject(res)}: dropping them changes no step in the replay{most}; nothing to "
        "drop, so no speedup is predicted"
    )


def finding(
    res: WhatIfResult, site: str | None = None, target: figures.Target | None = None
) -> str:
    """The what-if's finding, the same words in report, whatif, compare and the page: what
    was measured (GPU idle in the dropped calls on the rank where it is largest, per step
    and as a share of that rank's traced step), then the pipeline's prediction (its rank,
    the largest predicted step: ``whatif.figures``) with its band for ``target`` (default:
    the what-if's own), the caveats that change it, and where to measure it without a
    profiler."""
    pred = figures.prediction(res, target)
    if pred is None:
        return nothing_to_drop(res) + "."
    per = "step" if pred.basis == "step" else "GPU window"
    unit = unit_of(per)
    cal = pred.calibrated
    of = (
        f"{'traced ' if cal else ''}median step of {pred.idle_step_us:,.0f} us"
        if per == "step"
        else per
    )
    at = f" at {site}" if site else ""
    subject = _subject(res).lower() if res.callsite is None else _subject(res)
    if pred.direct_us >= 0.5:
        s = (
            f"Measured{' in the trace' if cal else ''}: {subject} left rank "
            f"{pred.idle_rank}'s GPU idle {pred.direct_us:,.0f} {unit} "
            f"({pct_text(share_pct(pred.direct_us, pred.idle_step_us))} of its {of}){at}."
        )
    else:  # no gap starts inside them: what they cost shows only after them
        s = (
            f"Measured: {subject} left no GPU idle inside them (rank {pred.idle_rank}'s "
            f"{of}): the GPU idles after them, waiting for launches."
        )
    if pred.withheld:
        return s + (
            f" Prediction withheld: {PEERS_MISSING} (the replay cannot free the "
            "waits of ranks it does not see); give every rank's trace, or measure "
            "with `profplug ab`."
        )
    why = []
    if res.rank(pred.rank).bound_binds:
        why.append("held to the data-flow bound: the hosts' own work sets the step")
    if res.max_model_error_pct > 5.0:
        why.append(f"model error up to {res.max_model_error_pct:.1f}%")
    speedup = pred.speedup or 0.0
    base = f"the given unprofiled step of {pred.run_step_us:,.1f} us" if cal else "the run's step"
    on = f" on rank {pred.rank}, the slowest" if pred.n_ranks > 1 else ""
    s += (
        f" Predicted with event-based waits: {pred.predicted_us:,.0f} {unit}{on} "
        f"({speedup:.2f}x {base}; +-{pred.band_pct:.0f}% for "
        f"{pred.target_words}{'; ' + '; '.join(why) if why else ''})"
    )
    for c in pred.caveats:
        s += f"; warning: {c}"
    return s + ("." if cal else "; `profplug ab` measures it without a profiler.")
