"""The what-if of every two-GPU (device, event) pair against its traced event run.

    .venv/bin/python benchmarks/whatif_two_gpu.py [PAIR_DIR ...] [--markdown]

A pair is a folder with ``device/`` and ``event/`` (traced runs of one job, one per
policy). Default: the shipped ``sample_traces/pp2_*`` pairs and, when present, the shared
Megatron-Core PP=2 client (``../shared/traces/mcore_pp2_client``). Per rank: the device
run's recorded step, the replay's own prediction, the data-flow bound, the prediction held to
it, the band at the traced host's speed and the band for a separate run, the event run's
measured step (the report's), the error and whether the measurement lies inside each band;
then the coverage (how many rank rows fall inside each band). Times in us.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def default_pairs() -> list[Path]:
    pairs = sorted(p.parent for p in (ROOT / "sample_traces").glob("pp2_*/**/device")
                   if (p.parent / "event").is_dir())
    shared = ROOT.parent / "shared" / "traces" / "mcore_pp2_client"
    return [*([shared] if shared.is_dir() else []), *pairs]


def rows(pair: Path) -> list[dict[str, object]]:
    from profplug.analyzers.scale.load import load_timelines
    from profplug.analyzers.stalls.rank import analyze_rank
    from profplug.analyzers.whatif import whatif

    res = whatif(load_timelines([pair / "device"], progress=False))
    measured = {}
    for tl in load_timelines([pair / "event"], progress=False):
        st = analyze_rank(tl).steps
        measured[tl.rank] = st.period_us if st is not None else float("nan")
    out = []
    for r in res.ranks:
        m = measured.get(r.rank, float("nan"))
        err = 100.0 * (r.predicted_us - m) / r.predicted_us  # % of the prediction (the band's)
        out.append({"pair": pair.name if pair.parent.name == "traces" else
                    str(pair.relative_to(ROOT / "sample_traces")),
                    "rank": r.rank, "recorded": r.recorded_us,
                    "replay": r.replay_predicted_us, "bound": r.bound_us,
                    "predicted": r.predicted_us, "binds": r.bound_binds,
                    "band": r.error_band_pct, "run_band": r.run_band_pct, "event": m,
                    "err": err, "in_band": abs(err) <= r.error_band_pct,
                    "in_run_band": abs(err) <= r.run_band_pct,
                    "speedup_pred": r.recorded_us / r.predicted_us,
                    "speedup_meas": r.recorded_us / m})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pairs", nargs="*", type=Path)
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args(argv)
    all_rows = [x for p in (a.pairs or default_pairs()) for x in rows(p)]
    head = ("pair", "rank", "recorded", "replay", "bound", "predicted", "x pred", "band +-%",
            "run band +-%", "event", "x meas", "err %", "in band", "in run band")
    sep = " | " if a.markdown else "  "
    print(("| " if a.markdown else "") + sep.join(head) + (" |" if a.markdown else ""))
    if a.markdown:
        print("|" + "---|" * len(head))
    for x in all_rows:
        cells = (x["pair"], x["rank"], f"{x['recorded']:,.0f}", f"{x['replay']:,.0f}",
                 f"{x['bound']:,.0f}" + (" (binds)" if x["binds"] else ""),
                 f"{x['predicted']:,.0f}", f"{x['speedup_pred']:.2f}x", f"{x['band']:.0f}",
                 f"{x['run_band']:.0f}", f"{x['event']:,.0f}", f"{x['speedup_meas']:.2f}x",
                 f"{x['err']:+.1f}", "yes" if x["in_band"] else "**no**",
                 "yes" if x["in_run_band"] else "**no**")
        print(("| " if a.markdown else "") + sep.join(map(str, cells))
              + (" |" if a.markdown else ""))
    n = len(all_rows)
    print(f"\ncoverage: {sum(bool(x['in_band']) for x in all_rows)} of {n} rank rows inside the "
          f"band, {sum(bool(x['in_run_band']) for x in all_rows)} of {n} inside the band for a "
          "separate run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
