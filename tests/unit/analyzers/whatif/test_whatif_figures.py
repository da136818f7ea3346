"""The figures of a prediction, made once (``whatif/figures.py``): which rank is the
pipeline's, which band goes with which target, and when there is nothing to predict."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from profplug.analyzers.whatif import figures
from profplug.analyzers.whatif.figures import Target


def _rank(rank: int, recorded: float, predicted: float, direct: float, **kw: Any) -> Any:
    return SimpleNamespace(**{
        "rank": rank, "basis": "step", "recorded_us": recorded, "replayed_us": recorded,
        "predicted_us": predicted, "direct_us": direct, "dropped_calls": 20,
        "error_band_pct": 10.0, "run_band_pct": 40.0, **kw})


def _res(*ranks: Any, calibrated: float | None = None, warnings: list[str] | None = None
         ) -> Any:
    return SimpleNamespace(ranks=list(ranks), warnings=warnings or [],
                           calibrated_on_us=calibrated)


def test_the_prediction_is_the_slowest_predicted_rank_and_the_idle_the_most_idle_rank() -> None:
    # given rank 0 with the most idle in the syncs and rank 1 predicted slowest
    res = _res(_rank(0, 5000.0, 3000.0, 200.0), _rank(1, 5100.0, 3400.0, 50.0))
    p = figures.prediction(res)
    assert p is not None
    # then the prediction is rank 1's, the speedup the run's step over it, the idle rank 0's
    assert (p.rank, p.predicted_us, p.idle_rank, p.direct_us) == (1, 3400.0, 0, 200.0)
    assert p.speedup == 5100.0 / 3400.0


def test_each_target_has_its_band() -> None:
    res = _res(_rank(0, 5000.0, 3000.0, 200.0))
    assert figures.prediction(res).band_pct == 40.0
    assert figures.prediction(res, Target.TRACED).target_words == "a separate traced run"
    assert figures.prediction(res, Target.REPLAY).band_pct == 10.0
    cal = _res(_rank(0, 500.0, 450.0, 0.0, error_band_pct=17.0, run_band_pct=50.0),
               calibrated=500.0)
    p = figures.prediction(cal)
    assert p is not None and p.target is Target.UNPROFILED and p.band_pct == 17.0


def test_a_drop_that_moves_no_step_predicts_nothing() -> None:
    # an event run: its one synchronize closes the window, outside every step
    res = _res(_rank(0, 3800.0, 3800.0, 0.0), _rank(1, 3820.0, 3819.0, 0.0))
    assert figures.nothing_to_drop(res) and figures.prediction(res) is None
    # no call dropped at all
    assert figures.prediction(_res(_rank(0, 100.0, 50.0, 5.0, dropped_calls=0))) is None


def test_a_withheld_band_and_the_warnings_that_change_the_answer() -> None:
    res = _res(_rank(0, 5000.0, 3000.0, 200.0, error_band_pct=None, run_band_pct=None),
               warnings=["peer ranks missing: ...", "data-flow bound: ...",
                         "unprofiled: no host scale in [0.05, 4.0] ..."])
    p = figures.prediction(res)
    assert p is not None and p.withheld and p.band_us() is None
    assert p.caveats == ["unprofiled: no host scale in [0.05, 4.0] ..."]
