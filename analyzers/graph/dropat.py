"""``--drop-at``: the call site the user names, resolved to one call site of the run.

Accepted: the full label (``profplug.recv_from_prev_pipeline_rank_ > profplug.sync.device``),
the name as the report prints it (``recv_from_prev_pipeline_rank_ > sync.device``), or any
substring of either that picks out one call site (``recv_from_prev``). No match, or several,
is an error listing the call sites of the syncs the rule would drop.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from profplug.analyzers.core import classify
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.core.timeline import Timeline
from profplug.analyzers.graph.dropset import DROP_POLICY
from profplug.analyzers.graph.model import DROP_DEVICE
from profplug.analyzers.stalls.callsites import display_name, enclosing

MAX_LISTED = 12


def site_counts(tl: Timeline, kinds: str) -> Counter[str]:
    """How many of the syncs ``kinds`` drops (device-wide, or every host-blocking one) each
    call site of one rank has, in the order the sites first appear (where the rank is read:
    ``whatif.rounds``)."""
    count: Counter[str] = Counter()
    # top-level calls, as the report's call sites
    kind = classify.call_kinds(tl.names, tl.api_name, tl.api_tops())
    want = (kind == classify.DEVICE) if kinds in (DROP_DEVICE, DROP_POLICY) else \
        (kind == classify.DEVICE) | (kind == classify.EVENT)
    idx = np.nonzero(want)[0]
    if idx.size:
        count.update(enclosing(tl, tl.api_start_ns[idx], tl.api_end_ns[idx], tl.api_tid[idx]))
    return count


def most_common(counts: list[Counter[str]]) -> list[str]:
    """The call sites of the ranks' :func:`site_counts` (in rank order), the most frequent
    first (ties: the first seen)."""
    total: Counter[str] = Counter()
    for c in counts:
        total.update(c)
    return [s for s, _ in total.most_common()]


def sync_callsites(timelines: list[Timeline], kinds: str) -> list[str]:
    """Call sites of the syncs ``kinds`` drops (device-wide, or every host-blocking one),
    the most frequent first."""
    return most_common([site_counts(tl, kinds) for tl in timelines])


def resolve_callsite(query: str, timelines: list[Timeline], kinds: str = DROP_DEVICE) -> str:
    """The one call site ``query`` names (see the module docstring); ProfplugError else."""
    return resolve_in(query, sync_callsites(timelines, kinds), kinds)


def resolve_in(query: str, sites: list[str], kinds: str = DROP_DEVICE) -> str:
    """The one call site of ``sites`` (:func:`sync_callsites`) that ``query`` names."""
    what = ("device-wide synchronize" if kinds in (DROP_DEVICE, DROP_POLICY)
            else "host-blocking sync")
    if not sites:
        raise ProfplugError(f"--drop-at {query}: the traces have no {what} to drop")
    for exact in (lambda s: s == query, lambda s: display_name(s) == query):
        found = [s for s in sites if exact(s)]
        if found:
            return found[0]
    q = query.lower()
    found = [s for s in sites if q in s.lower() or q in display_name(s).lower()]
    if len(found) == 1:
        return found[0]
    listed = "; ".join(display_name(s) for s in (found or sites)[:MAX_LISTED])
    more = len(found or sites) - MAX_LISTED
    listed += f"; and {more} more" if more > 0 else ""
    if found:
        raise ProfplugError(f"--drop-at {query} matches {len(found)} call sites of a {what}: "
                            f"{listed} (give more of the name)")
    raise ProfplugError(f"--drop-at {query} matches no call site of a {what}; call sites: "
                        f"{listed}")
