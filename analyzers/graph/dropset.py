"""The drop set: which top-level calls the what-if makes non-blocking (``--drop``), the one
place that chooses it (:func:`dropped_calls`, given a :class:`DropSpec`).

By default (``policy``) it drops what the sync policy changes: the device-wide synchronizes
inside the pipeline send/recv, and nothing else. ``profplug ab``'s ``event`` policy (and
``profplug run --sync event``) replaces only those (``profplug.p2p``); a job's own
``torch.cuda.synchronize()`` elsewhere (before a barrier, around a timer) stays, so a
prediction that dropped it would answer another question than the measurement.

A synchronize is inside the pipeline send/recv when a host range of its thread that encloses
it is named after Megatron-Core's p2p functions (``profplug.analyzers.core.names``:
``send_to_next_pipeline_rank``, ``recv_from_prev_pipeline_rank_``) as a whole word:
profplug's own ranges (``profplug.recv_from_prev_pipeline_rank_ peer=0`` around
``profplug.sync.device``, ``profplug.analyzers.core.ranges``), the range of a patched
``torch.cuda.synchronize`` called from those functions (``profplug.synchronize
.../communication_utils.py:NN recv_from_prev_pipeline_rank_``), or Megatron's own NVTX ranges
(``module.function``). A declared sync site's range (``profplug.sync_site MODULE:QUALNAME``,
``--sync-site``) is such a range too: its synchronizes are the ones the policy replaces.
transformers' pipeline is annotated with Megatron's names (``profplug.patching``), so its
synchronizes are found by the same rule. The enclosing range is found as call sites are
(``callsites.enclosing``), over those ranges only.

When no rank of the run has such a synchronize (a job with its own send/recv, or traces
without annotations), the policy cannot be located: the drop falls back to every device-wide
synchronize (``device-sync``) and the result says so. ``--drop device-sync`` asks for that
directly; ``--drop-at SITE`` names one call site (any device-wide synchronize there).

``all-sync``: every host-blocking call (stream/event synchronizes and blocking copies too);
``none``: nothing (the replay as recorded, used by ``--unprofiled``'s calibration).
``callsite`` narrows any of them to the calls at one call site (``callsites.enclosing``
label, ``--drop-at``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from profplug.analyzers.core import classify
from profplug.analyzers.core.memo import Memo
from profplug.analyzers.core.names import FUNCTIONS
from profplug.analyzers.core.ranges import SYNC_SITE
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.stalls.callsites import enclosing

DROP_POLICY = "policy"
DROP_DEVICE, DROP_ALL = "device-sync", "all-sync"
DROP_NONE = "none"  # nothing dropped: the replay as recorded (``--unprofiled`` calibration)
PIPELINE_FUNCTIONS = tuple(f for f in FUNCTIONS if "pipeline_rank" in f)  # send, recv
_PIPELINE = re.compile(r"(?<![A-Za-z0-9_])(?:" + "|".join(map(re.escape, PIPELINE_FUNCTIONS))
                       + r")(?![A-Za-z0-9_])")
POLICY_WORDS = "the device-wide synchronizes in the pipeline send/recv"
FALLBACK_NOTE = ("no device-wide synchronize inside a pipeline send/recv ("
                 + ", ".join(PIPELINE_FUNCTIONS) + ") in these traces: dropped every "
                 "device-wide synchronize instead (--drop device-sync)")


@dataclass
class DropSpec:
    """Which host-blocking calls the replay makes non-blocking."""

    kinds: str = DROP_POLICY  # policy | device-sync | all-sync | none (module docstring)
    callsite: str | None = None  # only calls at this call site (callsites.enclosing label)


def dropped_calls(tl: Timeline, kind: np.ndarray, blocking: np.ndarray, drop: DropSpec,
                  memo: Memo | None = None) -> np.ndarray:
    """Per API call of ``tl``: True when the prediction drops it. ``kind``: each call's
    ``classify`` kind (top-level calls: the strongest among themselves and their nested
    calls); ``blocking``: the top-level calls the model makes wait (host-blocking
    synchronizes and blocking copies); only those can be dropped. ``policy``: the
    device-wide ones whose own call, or a call nested in it, lies inside a pipeline
    send/recv range (:func:`policy_mask`); :func:`resolve` has already turned ``policy``
    into ``device-sync`` where the run has none."""
    if drop.kinds == DROP_NONE:
        return np.zeros(blocking.size, dtype=bool)
    if drop.kinds in (DROP_DEVICE, DROP_POLICY):
        cand: np.ndarray = blocking & (kind == classify.DEVICE)
    else:
        cand = blocking.copy()
    if drop.kinds == DROP_POLICY and drop.callsite is None and cand.any():
        inside = np.zeros(cand.size, dtype=bool)
        inside[tl.api_tops()[policy_mask(tl, memo)]] = True  # a nested sync marks its top call
        cand &= inside
    if drop.callsite is not None and cand.any():
        idx = np.nonzero(cand)[0]
        labels = enclosing(tl, tl.api_start_ns[idx], tl.api_end_ns[idx], tl.api_tid[idx])
        cand[idx[np.array([lab != drop.callsite for lab in labels], dtype=bool)]] = False
    return cand


def is_pipeline_range(name: str) -> bool:
    """Whether a host range's name names a pipeline send/recv or a declared sync site (see
    the module docstring)."""
    return name.startswith(SYNC_SITE + " ") or _PIPELINE.search(name) is not None


@lru_cache(maxsize=8192)  # a run's range names repeat on every rank and every what-if
def _pipeline_name(name: str) -> bool:
    return is_pipeline_range(name)


def policy_mask(tl: Timeline, memo: Memo | None = None) -> np.ndarray:
    """Per API call of ``tl``: True for a device-wide synchronize inside a pipeline send/recv
    range of its own thread (``memo``: computed once per timeline while the caller keeps it;
    one what-if asks for it in resolve, build_model and every rank's dropped_calls)."""
    if memo is None:
        return _policy_mask(tl, None)
    return memo.get("policy mask", (tl,), lambda: _policy_mask(tl, memo)).copy()


def _policy_mask(tl: Timeline, memo: Memo | None) -> np.ndarray:
    n = int(tl.api_start_ns.size)
    out = np.zeros(n, dtype=bool)
    if n == 0 or tl.ann_start_ns.size == 0:
        return out
    # the symbol table's kinds (classify: once per table)
    cand = np.nonzero(classify.kinds_for_symbols(tl.names, memo)[tl.api_name]
                      == classify.DEVICE)[0]
    if cand.size == 0:
        return out
    names = tl.names  # the annotations' distinct symbols (np.unique's, on a list)
    pipe = [k for k in sorted(set(tl.ann_name.tolist())) if _pipeline_name(names[k])]
    if not pipe:  # no pipeline range
        return out
    rows = np.nonzero(np.isin(tl.ann_name, pipe))[0]
    if rows.size == 0:
        return out
    # enclosed: a pipeline range of the call's thread starts at or before it and ends at or
    # after it (callsites.enclosing's innermost range exists), per thread: the latest end
    # of the ranges started so far
    for t in np.unique(tl.ann_tid[rows]).tolist():
        r = rows[tl.ann_tid[rows] == t]
        r = r[np.argsort(tl.ann_start_ns[r], kind="stable")]
        reach = np.maximum.accumulate(tl.ann_end_ns[r])
        c = cand[tl.api_tid[cand] == t]
        k = np.searchsorted(tl.ann_start_ns[r], tl.api_start_ns[c], side="right") - 1
        out[c] = (k >= 0) & (reach[np.maximum(k, 0)] >= tl.api_end_ns[c])
    return out


def resolve(timelines: list[Timeline], drop: DropSpec, memo: Memo | None = None
            ) -> tuple[DropSpec, str | None]:
    """The drop rule to replay with, and a note when it is not the one asked for: the
    ``policy`` rule falls back to ``device-sync`` when no rank has a synchronize inside a
    pipeline send/recv; with ``--drop-at`` the named call site's device-wide synchronizes
    are dropped whatever the policy."""
    if drop.kinds != DROP_POLICY:
        return drop, None
    if drop.callsite is not None:
        return replace(drop, kinds=DROP_DEVICE), None
    if any(policy_mask(tl, memo).any() for tl in timelines):
        return drop, None
    return replace(drop, kinds=DROP_DEVICE), FALLBACK_NOTE


def drop_words(kinds: str) -> str:
    """What a drop rule drops, in words (the finding line, the what-if's heading)."""
    if kinds == DROP_POLICY:
        return POLICY_WORDS
    if kinds == "all-sync":
        return "every host-blocking synchronize"
    if kinds == "none":
        return "nothing"
    return "every device-wide synchronize"  # DROP_DEVICE

