"""What the cross-rank analysis finds on the real 2-rank H200 samples (sample_traces/README.md,
"Bubbles across ranks"). Pinned findings, not exact numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
import sample_cache
from profplug.analyzers.crossrank import CrossRankResult
from profplug.analyzers.graph.matching import C_NAME, R_OTHER_RANK

ST = Path(__file__).resolve().parents[2] / "sample_traces"
DECODE = ["pp2_infer_kineto", "pp2_infer_nsys", "pp2_infer_repeats/kineto2",
          "pp2_infer_repeats/kineto3", "pp2_infer_repeats/nsys2", "pp2_infer_repeats/nsys3"]


def xr(rel: str) -> CrossRankResult:
    """The run's cross-rank analysis, made once per session (tests/sample_cache.py)."""
    return sample_cache.cross_rank(rel)


def per_step_bubble(res: CrossRankResult, rank: int) -> float:
    st = res.bubble(rank).steps
    assert st is not None and len(st.step_numbers) == 20
    return float(st.bubble_ns.mean()) / 1000


@pytest.mark.parametrize("run", DECODE)
def test_decode_loop_bubbles(run: str) -> None:
    dev, evt = xr(f"{run}/device"), xr(f"{run}/event")
    for res in (dev, evt):
        # every send/recv matched by the stated fallback (the old runtime named no peer)
        assert res.matching["rules"][R_OTHER_RANK] == 40
        assert set(res.matching["rules"]) <= {R_OTHER_RANK, C_NAME}
        assert not res.warnings
        b0, b1 = per_step_bubble(res, 0), per_step_bubble(res, 1)
        assert b0 == pytest.approx(b1, rel=0.05)  # one pipeline: one bubble (measured <= 4%)
        for b in res.bubbles:
            assert b.transfer_ns + b.wait_ns == b.comm_ns and b.unmatched_ns == 0
            assert b.transfer_ns < 41 * 20_000  # ~10 us per transfer: the rest is waiting
    # event waits shrink the bubble per step on both ranks
    for r in (0, 1):
        assert per_step_bubble(evt, r) < 0.8 * per_step_bubble(dev, r)


@pytest.mark.parametrize("run", DECODE)
def test_decode_loop_drain(run: str) -> None:
    dev, evt = xr(f"{run}/device"), xr(f"{run}/event")
    # with the device-wide synchronize every op starts right after its launch on both ranks
    assert all(d.lead_p50_ns is not None and d.lead_p50_ns < 20_000 for d in dev.drains)
    # with event waits one host runs ahead by far more, its queue stays full
    ahead = max(evt.drains, key=lambda d: d.lead_p50_ns or 0)
    assert ahead.lead_p50_ns is not None and ahead.lead_p50_ns > 500_000
    assert ahead.depth_mean > 10 * max(d.depth_mean for d in dev.drains)


@pytest.mark.parametrize("run", DECODE)
def test_decode_loop_critical_path_is_the_hosts(run: str) -> None:
    for res in (xr(f"{run}/device"), xr(f"{run}/event")):
        cp = res.critical_path
        assert cp.n_steps == 20 and cp.by_category["host_launch"] > 0.8
        assert sum(cp.by_rank.values()) == pytest.approx(1.0, abs=1e-3)


def test_megatron_broadcasts_match_by_name() -> None:
    res = xr("pp2_megatron_kineto/device")
    assert res.matching["rules"] == {R_OTHER_RANK: 20, C_NAME: 20}
