"""The position effect of an A/B of separate runs: is the first run of a round slower?

Model (least squares on the usable runs' log step times): ``log t = round + label +
first``, with a term per round (the round's host and machine state), per label (the
policies) and one for "first run of its round". Its coefficient is the position effect,
reported as ``+X%`` with a Student-t 95% CI (df = runs - terms). It can only be told apart
from the policies when the order varies (``counterbalanced`` or ``random``); under
``interleaved`` the same label is always first and the effect is confounded (said so).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from profplug.analyzers.ab import stats


def _positions(runs: Sequence[dict[str, Any]]) -> list[int]:
    """Each run's recorded position, else its place within its round in execution order."""
    seen: dict[int, int] = {}
    out = []
    for r in runs:
        rnd = int(r.get("round", 0))
        pos = r.get("position")
        out.append(int(pos) if pos is not None else seen.get(rnd, 0))
        seen[rnd] = seen.get(rnd, 0) + 1
    return out


def position_effect(runs: Sequence[dict[str, Any]], labels: Sequence[str]
                    ) -> dict[str, Any] | None:
    """``{first_run_pct, ci95_pct, rounds, runs, resolved, line}``; None when there is
    nothing to fit (fewer than 2 rounds with 2 usable runs)."""
    pos = _positions(runs)
    rows = [(int(r["round"]), r["policy"], p, float(r["median_step_us"]))
            for r, p in zip(runs, pos, strict=True)
            if r.get("status") == "ok" and r.get("median_step_us") and r["policy"] in labels]
    per_round: dict[int, int] = {}
    for rnd, *_ in rows:
        per_round[rnd] = per_round.get(rnd, 0) + 1
    rounds = sorted(k for k, n in per_round.items() if n >= 2)
    rows = [x for x in rows if x[0] in rounds]
    if len(rounds) < 2:
        return None
    used = [lb for lb in labels[1:] if any(x[1] == lb for x in rows)]
    x = np.array([[1.0 if rnd == k else 0.0 for k in rounds]
                  + [1.0 if lb == u else 0.0 for u in used]
                  + [1.0 if p == 0 else 0.0] for rnd, lb, p, _ in rows])
    y = np.log([t for *_, t in rows])
    out: dict[str, Any] = {"rounds": len(rounds), "runs": len(rows)}
    if np.linalg.matrix_rank(x) < x.shape[1]:
        out.update(first_run_pct=None, ci95_pct=None, resolved=None,
                   line="first run of a round: not separable from the policies (the same "
                        "policy ran first in every round: use the counterbalanced order)")
        return out
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    b = float(beta[-1])
    df = len(rows) - x.shape[1]
    out["first_run_pct"] = round(100.0 * (math.exp(b) - 1.0), 2)
    ci = None
    if df >= 1:
        resid = y - x @ beta
        s2 = float(resid @ resid) / df
        se = math.sqrt(max(s2 * float(np.linalg.inv(x.T @ x)[-1, -1]), 0.0))
        half = stats.t_quantile(df) * se
        ci = [round(100.0 * (math.exp(b - half) - 1.0), 2),
              round(100.0 * (math.exp(b + half) - 1.0), 2)]
    out["ci95_pct"] = ci
    out["resolved"] = None if ci is None else not ci[0] <= 0.0 <= ci[1]
    rounds_txt = f"{len(rounds)} rounds"
    out["line"] = (f"first run of a round: {out['first_run_pct']:+.1f}% "
                   + (f"(95% CI {ci[0]:+.1f}..{ci[1]:+.1f}%, {rounds_txt})" if ci else
                      f"({rounds_txt}: too few for a CI)"))
    return out
