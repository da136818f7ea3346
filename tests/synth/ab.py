"""``profplug ab``'s run records (what ab.json holds), synthetic, and their analysis."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from profplug.analyzers.ab import AbResult

AB_POLICIES = ["device", "event", "none"]
AB_MEANS = {"device": 2000.0, "event": 1000.0, "none": 990.0}


def ab_runs(rounds: int = 3, policies: list[str] = AB_POLICIES,
            digests: dict[tuple[int, int], list[str]] | None = None,
            failed: set[int] | tuple[int, ...] = (), steps: int = 20) -> list[dict[str, Any]]:
    """The interleaved runs of ``rounds`` rounds, two ranks each, with step times at AB_MEANS
    (+1% per round, +10 us on rank 1, +0..4 us by step) and the same digests, unless
    ``digests[(run, rank)]`` replaces a rank's step digests; runs in ``failed`` failed."""
    runs, k = [], 0
    for r in range(rounds):
        for p in policies:
            ranks = []
            for q in range(2):
                base = AB_MEANS[p] * (1 + 0.01 * r) + 10 * q
                times = [base + (i % 5) for i in range(steps)]
                ranks.append({"rank": q, "status": "finished", "clock": "cuda_event",
                              "requested_steps": steps, "step_us": times,
                              "host_step_us": [x + 3 for x in times],
                              "digest": "d", "digest_calls": 22,
                              "step_digests": (digests or {}).get((k, q),
                                                                  [f"{q}-{i}" for i in range(22)])})
            bad = k in failed
            runs.append({"index": k, "round": r, "policy": p,
                         "status": "failed" if bad else "ok", "exit_status": 1 if bad else 0,
                         "reasons": ["rank 1: exception: RuntimeError: boom"] if bad else [],
                         "ranks": ranks})
            k += 1
    return runs


def ab_result(runs: list[dict[str, Any]], rounds: int = 3, policies: list[str] = AB_POLICIES,
              **kw: Any) -> AbResult:
    """``analyze_ab`` of ``runs`` as ``profplug ab`` would (2 steps skipped of 20)."""
    from profplug.analyzers.ab import analyze_ab

    return analyze_ab(runs, policies=policies, rounds=rounds, skip=2, steps=20,
                      command=["torchrun", "job.py"], **kw)


def ab_run(k: int, rnd: int, label: str, step_us: list[float], pos: int = 0,
           counts: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """Run ``k`` of round ``rnd`` (policy ``label``, at ``pos`` in its round): one rank,
    its steps from 20 on; ``counts``: the policies' reach counters (``policy_counts``)."""
    rank: dict[str, Any] = {"rank": 0, "status": "finished", "clock": "host",
                            "first_step": 20, "step_us": step_us}
    if counts is not None:
        rank["policy_counts"] = counts
    return {"index": k, "round": rnd, "policy": label, "status": "ok", "exit_status": 0,
            "reasons": [], "position": pos, "ranks": [rank], **extra}
