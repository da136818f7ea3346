"""compare's arithmetic: B - A is the difference of the two steps it prints, each rank's
verdict that of the rank's printed steps; the noise is a property of the pair (the same
whichever run is A, the difference mirrored); every percentage of a difference is of one
stated base (the slower run's step); and times stay whole ns until the last division, also
at epoch-scale timestamps (1.764e18 ns, where float64 values are 256 ns apart)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
import sample_cache
from profplug.analyzers.compare.noise import ns, rank_step_ns, shown_diff_us
from profplug.analyzers.compare.reports import Comparison, compare
from profplug.analyzers.render.registry import render
from profplug.analyzers.report.analysis import Report, analyze
from sample_cache import SAMPLES
from synth import BASE_NS, NsysExport, build_rank, write_run

MCORE = Path("/work/shared/traces/mcore_pp2_client")
NUM = r"([+-]?[\d,]+\.\d)"


def _nsys_run(root: Path, kind: str, n_steps: int) -> Path:
    """compare's device or event run (``synth.build_rank``) as one Nsight export of both
    ranks, its times shifted by ``BASE_NS`` as integers."""
    ex = NsysExport(base_ns=BASE_NS)
    for r in range(2):
        p = ex.process(4000 + r)
        p.rank_mark(r)
        build_rank(kind, r, n_steps=n_steps, tr=p)
    return ex.write(root / f"{kind}.sqlite")


def _kineto_run(root: Path, kind: str, n_steps: int) -> Path:
    return write_run(root, kind, n_steps=n_steps)  # ts relative to BASE_NS


def _table(cmp: Comparison) -> str:
    out = io.StringIO()
    render(cmp, "table", out)
    return " ".join(out.getvalue().split())  # wrapped lines joined


def _num(s: str) -> float:
    return float(s.replace(",", ""))


def check_printed_arithmetic(cmp: Comparison) -> None:
    """The table's B - A is its printed B step less its printed A step, and each rank's
    verdict and delta are that rank's printed steps' difference, all with the same base."""
    text = _table(cmp)
    steps = re.search(rf"the run's step: A {NUM} us/step .*? vs B {NUM} us/step", text)
    diff = re.search(rf"B - A = {NUM} us/step \(([+-][\d.]+)% of (.+?)'s step", text)
    assert steps is not None and diff is not None, text[:600]
    a, b = _num(steps.group(1)), _num(steps.group(2))
    assert _num(diff.group(1)) == pytest.approx(b - a, abs=1e-9)
    assert diff.group(3) == (cmp.label_a if a >= b else cmp.label_b)  # the slower run
    assert cmp.noise is not None and cmp.noise.diff_pct == pytest.approx(
        100.0 * (cmp.noise.step_b_us - cmp.noise.step_a_us)
        / max(cmp.noise.step_a_us, cmp.noise.step_b_us))
    # the JSON's B - A is its steps' difference, in whole ns; and the rank that is the
    # slowest in both runs has the pipeline's difference
    doc = {k: v for k, v in cmp.to_dict().items() if k in ("a", "b", "noise")}
    step_a, step_b = doc["a"]["step"], doc["b"]["step"]
    assert ns(doc["noise"]["diff_us"]) == ns(step_b["us"]) - ns(step_a["us"])
    slow_a = max(step_a["per_rank_us"], key=lambda k: step_a["per_rank_us"][k])
    slow_b = max(step_b["per_rank_us"], key=lambda k: step_b["per_rank_us"][k])
    if slow_a == slow_b:
        rc = next(r for r in cmp.ranks if str(r.rank) == slow_a)
        assert rc.delta["step_us"] == doc["noise"]["diff_us"]
    for rc in cmp.ranks:
        row = re.search(rf"── rank {rc.rank} ─+ .*? step us {NUM} {NUM} {NUM}", text)
        assert row is not None
        ra, rb, rd = (_num(row.group(i)) for i in (1, 2, 3))
        assert rd == pytest.approx(rb - ra, abs=1e-9)
        said = re.search(rf"rank {rc.rank}: (?:.+? faster by ([\d,]+\.\d) us/step \(|"
                         rf"no difference beyond the noise: B - A = {NUM} us/step)", text)
        assert said is not None
        assert abs(_num(said.group(1) or said.group(2))) == pytest.approx(abs(rd), abs=1e-9)


def check_mirrored(ab: Comparison, ba: Comparison) -> None:
    """``compare B A`` against ``compare A B``: the same noise and base, B - A mirrored."""
    n, m = ab.noise, ba.noise
    assert n is not None and m is not None
    assert (m.noise_us, m.noise_pct, m.resolved) == (n.noise_us, n.noise_pct, n.resolved)
    assert (m.diff_us, m.diff_pct, m.ci95_us) == (-n.diff_us, -n.diff_pct,
                                                  (-n.ci95_us[1], -n.ci95_us[0]))
    assert m.base(ba.label_a, ba.label_b) == n.base(ab.label_a, ab.label_b)
    # the printed verdicts: the same words and noise, the signs of B - A turned
    (head_ab, tail_ab), (head_ba, tail_ba) = (c.verdict().split(" = ", 1) for c in (ab, ba))
    assert head_ab == head_ba and tail_ab == tail_ba.translate(str.maketrans("+-", "-+"))
    for x, y in zip(ab.ranks, ba.ranks, strict=True):
        assert (y.faster, y.diff_us, y.diff_pct) == (x.faster, x.diff_us, x.diff_pct)
        if x.noise is not None:
            assert y.noise is not None and y.noise.noise_us == x.noise.noise_us


@pytest.mark.parametrize("make", [_kineto_run, _nsys_run], ids=["kineto", "nsys"])
def test_twelve_100us_steps_against_twelve_80us_steps_at_epoch_scale_differ_by_20us(
        make: object, tmp_path: Path) -> None:
    # given twelve 100.000 us steps (device) and twelve 80.000 us steps (event), two ranks,
    # their timestamps at 1.764e18 ns
    dev, evt = (analyze([make(tmp_path, k, 12)]) for k in ("device", "event"))
    assert all(int(r.step_starts_ns[0]) > BASE_NS for r in (*dev.ranks, *evt.ranks))
    # then every per-step period is whole ns: 100,000 and 80,000 exactly
    for rep, period in ((dev, 100_000), (evt, 80_000)):
        for r in rep.ranks:
            x, basis = rank_step_ns(r)
            assert basis == "gpu period" and x.dtype == np.int64 and set(x.tolist()) == {period}
            assert r.steps is not None and set(r.steps.period_us_per_step) == {period / 1000}
    # and B - A is exactly -20.0 us, 20% of the device run's step, in either order
    cmp, back = compare(dev, evt, "device", "event"), compare(evt, dev, "event", "device")
    assert cmp.noise is not None and back.noise is not None
    assert (cmp.noise.diff_us, cmp.noise.diff_pct, cmp.noise.ci95_us) == (
        -20.0, -20.0, (-20.0, -20.0))
    assert cmp.verdict() == ("event faster: B - A = -20.0 us/step (-20.0% of device's step; "
                             "noise ±2.0%)")
    assert back.verdict() == ("event faster: B - A = +20.0 us/step (+20.0% of device's step; "
                              "noise ±2.0%)")
    check_printed_arithmetic(cmp)
    check_printed_arithmetic(back)
    check_mirrored(cmp, back)


def test_the_difference_is_of_the_printed_steps_when_rounding_parts_them() -> None:
    # given steps whose exact difference (19.98) and printed one (80.1 - 100.0) part at
    # the first decimal
    assert f"{100.04:.1f}" == "100.0" and f"{80.06:.1f}" == "80.1"
    # then the printed B - A is that of the printed steps
    assert shown_diff_us(100.04, 80.06) == -19.9
    assert shown_diff_us(80.06, 100.04) == 19.9
    assert shown_diff_us(5_899.25, 3_826.75) == pytest.approx(
        float(f"{3_826.75:.1f}") - float(f"{5_899.25:.1f}"))


PAIRS = [(d, d.with_name("event")) for d in sorted(SAMPLES.glob("**/device"))
         if d.with_name("event").is_dir()]  # every shipped device run and its event run


def test_the_shipped_pairs_include_every_two_gpu_pair() -> None:
    assert sum(p[0].relative_to(SAMPLES).parts[0].startswith("pp2_") for p in PAIRS) == 8


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: str(p[0].parent.relative_to(SAMPLES)))
def test_sample_pairs_print_b_minus_a_of_their_steps_in_both_orders(
        pair: tuple[Path, Path]) -> None:
    # given a shipped device run and its event run (the two-GPU ones and the H200 PP=1)
    dev, evt = (sample_cache.stalls(p) for p in pair)
    ab, ba = compare(dev, evt, "device", "event"), compare(evt, dev, "event", "device")
    # then each order prints B - A of its printed steps, and the two orders mirror
    check_printed_arithmetic(ab)
    check_printed_arithmetic(ba)
    check_mirrored(ab, ba)


@pytest.mark.skipif(not MCORE.is_dir(), reason="the Megatron-Core client traces are absent")
def test_megatron_core_client_pair_prints_b_minus_a_of_its_steps_in_both_orders() -> None:
    dev: Report = analyze([MCORE / "device"])
    evt: Report = analyze([MCORE / "event"])
    ab, ba = compare(dev, evt, "device", "event"), compare(evt, dev, "event", "device")
    check_printed_arithmetic(ab)
    check_printed_arithmetic(ba)
    check_mirrored(ab, ba)
