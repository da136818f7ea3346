"""``profplug compare A B`` where B is a ``profplug ab`` directory (its ``ab.json``): A's
what-if against ab's measurement, the question a user asks ("the what-if said X; ab measured
Y").

A is a traced run; ab's runs are unprofiled, so A's what-if is made at the unprofiled host
speed (``whatif_unprofiled``, calibrated on ab's device median and its CI, as ``profplug ab
--whatif`` does) and compared with the measured policy (``event`` by default: the policy
without the device-wide synchronizes) at its median over rounds and 95% CI. Times in us.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from profplug.analyzers.ab.result import SCHEMA_VERSION
from profplug.analyzers.compare.answer import Answer, whatif_answer_ab
from profplug.analyzers.compare.guard import guard, with_caveat
from profplug.analyzers.core.errors import ProfplugError
from profplug.analyzers.whatif import figures
from profplug.analyzers.whatif.result import WhatIfResult

if TYPE_CHECKING:
    from profplug.analyzers.report.analysis import Report


@dataclass
class AbComparison:
    """A's what-if (at ab's unprofiled device step) against one policy of an ``ab.json``."""

    key: ClassVar[str] = "compare_ab"

    label_a: str
    label_b: str
    policy: str
    report_a: Report
    answer: Answer
    ab_verdict: str  # ab's own verdict line for the policy
    calibrated_on_us: float  # ab's device median
    round_medians_us: list[float]  # the policy's median step per round (ok rounds)
    warnings: list[str] = field(default_factory=list)  # before the answer (compareguard)

    def to_dict(self) -> dict[str, Any]:
        return {"version": 1, "kind": "compare-ab", "a": {"label": self.label_a},
                "b": {"label": self.label_b, "policy": self.policy},
                "calibrated_on_us": round(self.calibrated_on_us, 3),
                "answer": {**self.answer.to_dict(),
                           "sentence": self.answer.sentence(self.label_a, self.label_b)},
                "ab_verdict": self.ab_verdict,
                "round_medians_us": [round(x, 3) for x in self.round_medians_us],
                "warnings": list(self.warnings)}


def is_ab_dir(run: str) -> bool:
    return (Path(run) / "ab.json").is_file()


def load_ab(out: Path) -> dict[str, Any]:
    """``out/ab.json`` as a dict (a one-line ProfplugError when it is not one ab wrote)."""
    path = out / "ab.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ProfplugError(f"{path}: unreadable ({exc})") from None
    if not isinstance(doc, dict) or not doc.get("policies") or not isinstance(
            doc.get("summary"), dict):
        raise ProfplugError(f"{path}: not an ab.json (no policies or summary)")
    if doc.get("version") != SCHEMA_VERSION:
        raise ProfplugError(f"{path}: ab.json version {doc.get('version')!r} (this profplug "
                            f"reads version {SCHEMA_VERSION})")
    return doc


def pick_policy(doc: dict[str, Any], policy: str | None = None) -> str:
    """The measured policy: ``policy``, else ``event``, else the first that is not device."""
    policies = [str(p) for p in doc.get("policies", [])]
    if policy is not None:
        if policy not in policies:
            raise ProfplugError(f"ab.json has no policy {policy!r} ({', '.join(policies)})")
        return policy
    if "event" in policies:
        return "event"
    rest = [p for p in policies if p != "device"]
    if not rest or "device" not in policies:
        raise ProfplugError("ab.json needs a device policy and another one to compare a "
                            "what-if with")
    return rest[0]


def device_step(doc: dict[str, Any]) -> tuple[float, tuple[float, float] | None]:
    """ab's device median over rounds and its 95% CI (None with fewer than 3 rounds)."""
    s = (doc.get("summary") or {}).get("device") or {}
    med = s.get("median_step_us")
    if not isinstance(med, (int, float)) or med <= 0:
        raise ProfplugError("ab.json has no device median step (did the device runs fail?)")
    ci = s.get("ci95_us")
    return float(med), (float(ci[0]), float(ci[1])) if isinstance(ci, list) and len(ci) == 2 \
        else None


def speedup_ci(doc: dict[str, Any], policy: str) -> tuple[float, float] | None:
    """ab's 95% CI of ``policy``'s speedup over device, when its rounds are paired with the
    device rounds (each round both policies: ``paired``); else None."""
    s = (doc.get("summary") or {}).get(policy) or {}
    ci = s.get("speedup_ci95")
    if not s.get("paired") or not isinstance(ci, list) or len(ci) != 2 \
            or not all(isinstance(x, (int, float)) for x in ci):
        return None
    return float(ci[0]), float(ci[1])


def compare_ab(rep_a: Report, doc: dict[str, Any], label_a: str, label_b: str,
               policy: str, calibrated_on_us: float) -> AbComparison:
    ans = whatif_answer_ab(rep_a, doc, policy)
    if ans is None:
        w = rep_a.run.get(WhatIfResult.key)
        if isinstance(w, WhatIfResult) and w.ranks and figures.nothing_to_drop(w):
            raise ProfplugError(f"{label_a}: dropping {w.dropped()} changes no step in its "
                                "replay: nothing to drop, no prediction to set against ab")
        raise ProfplugError(f"{label_a}: no per-step what-if to compare with ab (does the run "
                            "have step ranges?)")
    warns, caveat = guard(rep_a, None, label_a, label_b)
    ans = with_caveat(ans, caveat) or ans
    s = (doc.get("summary") or {}).get(policy) or {}
    rounds = [float(x) for x in s.get("round_medians_us") or [] if isinstance(x, (int, float))]
    return AbComparison(label_a, label_b, policy, rep_a, ans, str(s.get("verdict") or ""),
                        calibrated_on_us, rounds, warns)
