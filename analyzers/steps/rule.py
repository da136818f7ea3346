"""Which host ranges are steps: a step rule, applied to a timeline's annotations.

Readers keep every host range as an annotation (``ann_*``) and call :func:`apply_steps` with
the rule they were given (``ReadOptions.steps``), so Kineto user annotations
(``record_function``) and Nsight NVTX ranges follow one rule:

- the default (:data:`DEFAULT_STEPS`): torch.profiler's ``ProfilerStep#N`` ranges (numbered
  N); a rank without any uses profplug's ``profplug.step`` ranges (numbered in time order).
  A step marked both ways (``profplug run`` names each step both ways, for HTA) counts once:
  as its ``ProfilerStep#N``.
- ``--step-range NAME``: the ranges named exactly NAME; ``--step-range re:REGEX``: the
  ranges whose name contains a match of REGEX (``re.search``; anchor it with ``^...$``).
  Numbered by the regex's first group when that is an integer in every match, else in time
  order.

Matching ranges nested in another match (or with the same span) count once, as the
outermost. ``ProfilerStep#N`` ranges mark steps, never call sites: they leave the
annotations whatever the rule; one whose N does not fit int64 is skipped and counted
(``step number out of range``). The rule that found a rank's steps is ``Timeline.steps_rule``
(None when none was found); the report prints it (JSON ``steps_rule``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.ranges import STEP
from profplug.analyzers.core.saferegex import search_all
from profplug.analyzers.core.timeline import STEP_RE, Timeline


class StepsFound(Protocol):
    """What :func:`check_matched` reads of a rank (a Timeline or a ``stalls.rank.RankResult``)."""

    @property
    def rank(self) -> int: ...
    @property
    def steps_rule(self) -> str | None: ...
    @property
    def warnings(self) -> list[str]: ...

REGEX_PREFIX = "re:"
PROFILER_STEP = "ProfilerStep#N"
MAX_DIGITS = 18  # a step number with more digits does not fit int64
OUT_OF_RANGE = "step number out of range"  # a ProfilerStep#N skipped (Timeline.skipped)


def _step_number(text: str | None) -> int | None:
    """A step number from a name's digits (decimal digits int() reads: not "²"), when it
    fits int64; else None."""
    if text is None or not text.isdecimal() or len(text) > MAX_DIGITS:
        return None
    return int(text)


@dataclass(frozen=True)
class StepRule:
    """A step rule: ``spec`` None is the default; else a range name or ``re:REGEX``."""

    spec: str | None = None

    @classmethod
    def parse(cls, spec: str | None) -> StepRule:
        """The rule of ``--step-range SPEC`` (None: the default); a bad regex is an error."""
        if spec is None:
            return cls()
        if not spec or spec == REGEX_PREFIX:
            raise ProfplugError("--step-range needs a range name or re:REGEX")
        if spec.startswith(REGEX_PREFIX):
            try:
                re.compile(spec[len(REGEX_PREFIX):])
            except (re.error, OverflowError, RecursionError) as exc:  # a{99999999999}
                raise ProfplugError(f"--step-range {spec}: bad regular expression ({exc})"
                                    ) from None
        return cls(spec)

    @property
    def is_default(self) -> bool:
        return self.spec is None

    def describe(self) -> str:
        """What the rule looks for, for messages."""
        if self.spec is None:
            return f"{PROFILER_STEP} or {STEP} ranges"
        return f"ranges matching --step-range {self.spec}"

    def symbols(self, names: list[str]) -> dict[int, int | None]:
        """Symbol ids of the names this rule takes -> the step number the name gives, if any.

        Only for an explicit rule (the default picks between two rules per rank).
        """
        spec = self.spec or ""
        if not spec.startswith(REGEX_PREFIX):
            return {i: None for i, n in enumerate(names) if n == spec}
        # bounded: the regex is the user's, the names the trace's (saferegex)
        return {i: _step_number(g)
                for i, g in search_all(spec[len(REGEX_PREFIX):], names)}


DEFAULT_STEPS = StepRule()


def _profiler_steps(names: list[str]) -> tuple[dict[int, int | None], list[int]]:
    """``ProfilerStep#N`` symbols -> N; and the symbols whose N is out of range."""
    steps: dict[int, int | None] = {}
    bad: list[int] = []
    for i, n in enumerate(names):
        m = STEP_RE.match(n)
        if m:
            num = _step_number(m.group(1))
            if num is None:
                bad.append(i)
            else:
                steps[i] = num
    return steps, bad


def apply_steps(tl: Timeline, rule: StepRule = DEFAULT_STEPS) -> Timeline:
    """Fill ``tl``'s ``step_*`` columns and ``steps_rule`` from its annotations by ``rule``;
    ``ProfilerStep#N`` ranges leave the annotations. Returns ``tl`` (changed in place)."""
    names = tl.names
    prof, bad = _profiler_steps(names)
    if bad:  # ProfilerStep#<19+ digits>: no step, no call site; counted
        out = np.isin(tl.ann_name, np.array(bad, dtype=np.int64))
        tl.skip(OUT_OF_RANGE, int(out.sum()))
        keep = ~out
        tl.ann_start_ns, tl.ann_end_ns = tl.ann_start_ns[keep], tl.ann_end_ns[keep]
        tl.ann_tid, tl.ann_name = tl.ann_tid[keep], tl.ann_name[keep]
    is_prof = np.isin(tl.ann_name, np.fromiter(prof, dtype=np.int64, count=len(prof)))
    if rule.is_default:
        if is_prof.any():
            syms, label = prof, PROFILER_STEP
        else:
            syms = {i: None for i, n in enumerate(names) if n == STEP}
            label = STEP
    else:
        syms, label = rule.symbols(names), f"--step-range {rule.spec}"
    sel = np.nonzero(np.isin(tl.ann_name, np.fromiter(syms, dtype=np.int64,
                                                        count=len(syms))))[0]
    sel = _outermost(sel, tl.ann_start_ns, tl.ann_end_ns)
    nums = [syms[int(n)] for n in tl.ann_name[sel]]
    tl.step_start_ns = tl.ann_start_ns[sel]
    tl.step_end_ns = tl.ann_end_ns[sel]
    if nums and all(n is not None for n in nums):
        tl.step_num = np.array(nums, dtype=np.int64)
    else:
        tl.step_num = np.arange(sel.size, dtype=np.int64)
    tl.steps_rule = label if sel.size else None
    if not sel.size and not rule.is_default:  # the rule's range names are not here
        tl.warnings.append(f"{NO_MATCH} {rule.spec}; {_frequent(tl)}")
    if is_prof.any():  # step markers, never call sites
        keep = ~is_prof
        tl.ann_start_ns, tl.ann_end_ns = tl.ann_start_ns[keep], tl.ann_end_ns[keep]
        tl.ann_tid, tl.ann_name = tl.ann_tid[keep], tl.ann_name[keep]
    return tl


NO_MATCH = "no range matches --step-range"  # a rank's warning (Timeline.warnings)
FREQUENT = 5  # range names listed when --step-range matches nothing
NAME_CHARS = 60  # a listed name longer than this is cut


def _frequent(tl: Timeline) -> str:
    """The rank's most frequent host range names with their counts, ``ProfilerStep#N``
    counted as one name."""
    if not tl.ann_name.size:
        return "this rank has no host ranges"
    counts: dict[str, int] = {}
    for sym, n in enumerate(np.bincount(tl.ann_name).tolist()):
        if n:
            name = PROFILER_STEP if STEP_RE.match(tl.names[sym]) else tl.names[sym]
            counts[name] = counts.get(name, 0) + n
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:FREQUENT]
    listed = ", ".join(f"{_cut(name)!r} ({n:,})" for name, n in top)
    more = f" and {len(counts) - len(top):,} more" if len(counts) > len(top) else ""
    return f"its most frequent host ranges: {listed}{more}"


def _cut(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[:NAME_CHARS - 3] + "..."


def check_matched(rule: StepRule, ranks: Sequence[StepsFound]) -> None:
    """An explicit ``--step-range`` that found no step on any rank is an error, naming the
    range names the first rank has (one line); the default rule is never one."""
    if rule.is_default or not ranks or any(r.steps_rule is not None for r in ranks):
        return
    first = min(ranks, key=lambda r: r.rank)
    note = next((w for w in first.warnings if w.startswith(f"{NO_MATCH} {rule.spec};")), "")
    listing = note.partition("; ")[2].removeprefix("its ")
    where = "the rank" if len(ranks) == 1 else f"any of the {len(ranks)} ranks"
    raise ProfplugError(f"--step-range {rule.spec} matches no range on {where}"
                        + (f"; rank {first.rank}'s {listing}" if listing else ""))


def _outermost(sel: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The ranges of ``sel`` not inside (or equal to) an earlier one, in time order."""
    if sel.size == 0:
        return sel
    order = sel[np.lexsort((-end[sel], start[sel]))]  # by start, the longest first
    e = end[order]
    reach = np.maximum.accumulate(e)
    inside = np.zeros(order.size, dtype=bool)
    inside[1:] = e[1:] <= reach[:-1]
    return order[~inside]
