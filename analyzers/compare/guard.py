"""What ``compare`` questions before it answers: a comparison that is not the one it seems.

- **Same run** (:func:`same_run`): A and B read the same traces (by content,
  ``scale.fingerprint``: a copy, a hard or symbolic link, the same path): the comparison is
  an A/A, its difference the analysis's own, not a policy's.
- **Other tools** (:func:`tools_differ`): A traced by Kineto, B by Nsight Systems: each
  tool's own cost and clock are in the difference.
- **A is not a device run** (:func:`not_device_run`): A's what-if found no device-wide
  synchronize inside a pipeline send/recv to drop (``graph.dropset``: the policy's call
  sites). It then falls back to every device-wide synchronize: fewer than one dropped per
  two steps (an event run's closing synchronize), it predicts nothing; more, it predicts
  dropping all of them, not the send/recv policy, and says so.

Each gives a warning (printed before the answer) and the answer's caveat, what it is.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from profplug.analyzers.graph.dropset import FALLBACK_NOTE
from profplug.analyzers.whatif.result import WhatIfResult

if TYPE_CHECKING:
    from profplug.analyzers.compare.answer import Answer
    from profplug.analyzers.report.analysis import Report

SAME_RUN = "same run: an A/A"
NOT_DEVICE = ("{a} has no device-wide synchronize in its send/recv: its what-if predicts "
              "nothing")


def trace_files(rep: Report) -> frozenset[Path]:
    """Every trace file of the run's ranks, resolved."""
    return frozenset(Path(f).resolve() for r in rep.ranks for f in r.files)


def same_run(rep_a: Report, rep_b: Report) -> bool:
    """Whether A and B read the same traces: the same files, or the same content."""
    from profplug.analyzers.scale.fingerprint import files_fingerprint

    fa, fb = trace_files(rep_a), trace_files(rep_b)
    if not fa or not fb:
        return False
    if fa == fb:
        return True
    key = files_fingerprint(fa)
    return key is not None and key == files_fingerprint(fb)


TOOL_NAMES = MappingProxyType({"kineto": "Kineto (torch.profiler)", "nsys": "Nsight Systems"})


def tools_differ(rep_a: Report, rep_b: Report) -> tuple[str, str] | None:
    """The tools that traced A and B, when they are not the same one."""
    ta = sorted({r.source for r in rep_a.ranks})
    tb = sorted({r.source for r in rep_b.ranks})
    if not ta or not tb or ta == tb:
        return None
    return (" and ".join(TOOL_NAMES.get(t, t) for t in ta),
            " and ".join(TOOL_NAMES.get(t, t) for t in tb))


def not_device_run(rep_a: Report) -> str:
    """"" when A's what-if drops device-wide synchronizes in a pipeline send/recv (a device
    run); else why not: ``"nothing"`` (what it drops is fewer than one call per two steps:
    the profiler's closing synchronize, say), or ``"fallback"`` (it drops every device-wide
    synchronize instead, ``dropset.FALLBACK_NOTE``)."""
    w: Any = rep_a.run.get(WhatIfResult.key)
    if w is None:
        return ""
    ranks = list(getattr(w, "ranks", []))
    fallback = str(getattr(w, "drop_note", "") or "").startswith(FALLBACK_NOTE[:60])
    per_step = max((r.dropped_calls / max(r.n_steps, 1) for r in ranks
                    if getattr(r, "basis", "") == "step"), default=0.0)
    if not any(r.dropped_calls for r in ranks) or (fallback and per_step < 0.5):
        return "nothing"
    return "fallback" if fallback else ""


def guard(rep_a: Report, rep_b: Report | None, label_a: str, label_b: str
          ) -> tuple[list[str], str]:
    """(warnings, the answer's caveat) for A against B (``rep_b`` None: B is an ab
    directory, no traces)."""
    warns: list[str] = []
    what: list[str] = []
    if rep_b is not None and same_run(rep_a, rep_b):
        warns.append(f"{label_a} and {label_b} are the same run (the same traces, by content): "
                     "their difference is no policy's")
        what.append(SAME_RUN)
    tools = tools_differ(rep_a, rep_b) if rep_b is not None else None
    if tools is not None:
        warns.append(f"{label_a} was traced by {tools[0]}, {label_b} by {tools[1]}: each "
                     "tool's own overhead is in the difference (compare runs of one tool)")
    why = not_device_run(rep_a)
    if why == "nothing":
        line = NOT_DEVICE.format(a=label_a)
        warns.append(f"{line} (compare a run with the device policy against one without)")
        what.append(line)
    elif why == "fallback":
        line = (f"{label_a} has no device-wide synchronize in its send/recv: its what-if "
                "drops every device-wide synchronize instead, not the send/recv policy")
        warns.append(line)
        what.append(line)
    return warns, "; ".join(what)


def with_caveat(ans: Answer | None, caveat: str) -> Answer | None:
    """``ans`` with ``caveat`` leading its own (None stays None)."""
    if ans is None or not caveat:
        return ans
    return replace(ans, caveat="; ".join(x for x in (caveat, ans.caveat) if x))
