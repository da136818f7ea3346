"""An A/B as a self-contained HTML page: no network, no script, no plotting library.

Plots, inline SVG drawn in Python (``ab_svg``) from :func:`plot_data`'s numbers (quantiles
and histogram counts, not every step): each run's step-time distribution (box: 5th, 25th,
50th, 75th, 95th percentile of the pipeline's per-step time) in execution order, coloured by
policy; each policy's median with its 95% CI and its round medians; each policy's speedup
over device with its CI and per-round ratios; the pooled step-time distribution per policy,
with a what-if prediction (``--whatif``) and its band drawn on it. Then the summary, the
output check, and every run. Times in us. Every string goes through ``escape.e``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
from profplug.analyzers.ab.overlay import line as whatif_line
from profplug.analyzers.ab.stats import pipeline_steps
from profplug.analyzers.ab.switched import kept_steps
from profplug.analyzers.render.ab_svg import ci_svg, dist_svg, runs_svg, speedup_svg
from profplug.analyzers.render.ab_table import CLOCKS, design_lines, outputs_line
from profplug.analyzers.render.crossrank_svg import legend
from profplug.analyzers.render.escape import e
from profplug.analyzers.render.palette import policy_color

if TYPE_CHECKING:
    from profplug.analyzers.ab.result import AbResult

BINS = 60

_STYLE = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 1.5em 2em;
       color: #222; }
h1 { font-size: 1.4em; margin: .8em 0 .2em; }
h2 { font-size: 1.15em; margin: 1.6em 0 .4em; border-bottom: 1px solid #ddd; }
.sub { color: #666; }
.verdict { font-size: 1.1em; font-weight: 600; margin: .2em 0; }
.bad { color: #b00020; font-weight: 700; }
table { border-collapse: collapse; margin: .4em 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: right; }
th { background: #f4f4f4; }
td.t, th.t { text-align: left; max-width: 48em; overflow-wrap: break-word; }
.legend { margin: .3em 0; }
.legend .key { margin-right: 1.2em; white-space: nowrap; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 5px;
            vertical-align: -1px; }
svg.ab-plot { display: block; max-width: 100%; height: auto; font-size: 12px; }
svg.ab-plot text { fill: #333; }
pre { background: #f7f7f7; padding: .5em; overflow: auto; max-height: 30em; }
"""


def _pipeline(run: dict[str, Any]) -> np.ndarray:
    ranks = sorted(run.get("ranks", []), key=lambda k: int(k["rank"]))
    return pipeline_steps([k.get("step_us") or [] for k in ranks])


def plot_data(res: AbResult) -> dict[str, Any]:
    """What the page's plots draw (small: quantiles and histogram counts, not every step)."""
    runs: list[dict[str, Any]] = []
    pooled: dict[str, list[np.ndarray]] = {p: [] for p in res.policies}
    for r in res.runs:
        steps = _pipeline(r)
        q = np.percentile(steps, [5, 25, 50, 75, 95]).round(3).tolist() if steps.size else None
        runs.append({"label": f"r{r['round']} {r['policy']}", "policy": r["policy"],
                     "index": r["index"],
                     "round": r["round"], "ok": r.get("status") == "ok", "q": q,
                     "n": int(steps.size)})
        if r.get("status") == "ok" and steps.size and r.get("block_order"):
            for label, kept in kept_steps(r).items():  # switched: each policy's blocks
                pooled.setdefault(label, []).append(np.asarray(kept))
        elif r.get("status") == "ok" and steps.size:
            pooled[r["policy"]].append(steps)
    allv = [a for v in pooled.values() for a in v]
    hist: dict[str, Any] = {}
    if allv:
        cat = np.concatenate(allv)
        lo, hi = np.percentile(cat, [0.5, 99.5])
        edges = np.linspace(lo, hi if hi > lo else lo + 1.0, BINS + 1)
        hist["edges"] = edges.round(3).tolist()
        for p, arrays in pooled.items():
            if arrays:
                counts, _ = np.histogram(np.clip(np.concatenate(arrays), lo, hi), edges)
                hist[p] = counts.tolist()
    dev = res.policy("device").round_medians_us
    summary = [{"policy": s.policy, "median": s.median_step_us,
                "ci": s.ci95_us, "rounds": s.round_medians_us,
                "speedup": s.speedup_vs_device, "speedup_ci": s.speedup_ci95,
                "round_ratios": [] if s.policy == "device" else [
                    (k, round(d / v, 4)) for k, (d, v) in enumerate(
                        zip(dev, s.round_medians_us, strict=False)) if d and v]}
               for s in res.summary]
    wi = res.whatif
    return {"policies": res.policies,
            "colors": {p: policy_color(p) for p in res.policies},
            "runs": runs, "summary": summary, "hist": hist,
            "whatif": None if wi is None else {
                "predicted": wi.get("predicted_step_us"), "band": wi.get("predicted_band_us"),
                "traced": (wi.get("traced") or {}).get("predicted_step_us"),
                "recorded": wi.get("recorded_step_us"), "policy": wi.get("measured_policy")}}


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _summary_table(res: AbResult) -> str:
    rows = []
    for s in res.summary:
        few = "too few rounds" if s.median_step_us is not None else "-"
        ci = few if not s.ci95_us else f"{s.ci95_us[0]:,.1f} - {s.ci95_us[1]:,.1f}"
        sp = "1.00x" if s.policy == "device" else (
            "-" if s.speedup_vs_device is None else f"{s.speedup_vs_device:.3f}x")
        spci = (f"{s.speedup_ci95[0]:.3f} - {s.speedup_ci95[1]:.3f}x" if s.speedup_ci95
                else few if s.speedup_vs_device is not None else "")
        med = "-" if s.median_step_us is None else f"{s.median_step_us:,.1f}"
        host = "-" if s.host_median_step_us is None else f"{s.host_median_step_us:,.1f}"
        rows.append(f'<tr data-policy="{e(s.policy)}"><td class="t">{e(s.policy)}</td>'
                    f"<td>{s.rounds_ok}/{s.rounds}</td><td>{med}</td><td>{ci}</td>"
                    f"<td>{sp}</td><td>{spci}</td><td>{host}</td></tr>")
    return ('<table id="ab-summary"><thead><tr><th class="t">policy</th><th>rounds ok</th>'
            "<th>median us/step</th><th>95% CI us</th><th>speedup vs device</th>"
            "<th>95% CI</th><th>host median us</th></tr></thead><tbody>" + "".join(rows)
            + "</tbody></table>")


def _runs_table(res: AbResult) -> str:
    rows = []
    for r in res.runs:
        ranks = " · ".join(f"{k['rank']}: {_us(k.get('median_step_us'))}"  # escaped below
                           for k in r.get("ranks", []))
        why = "; ".join(r.get("reasons") or [])
        med = r.get("median_step_us")
        rows.append(f'<tr class="{"ok" if r.get("status") == "ok" else "failed"}">'
                    f"<td>{e(r['index'])}</td><td>{e(r['round'])}</td>"
                    f'<td class="t">{e(r["policy"])}</td><td class="t">{e(r.get("status"))}</td>'
                    f"<td>{e(r.get('exit_status'))}</td>"
                    f"<td>{_us(med)}</td>"
                    f'<td class="t">{e(ranks)}</td><td class="t">{e(why)}</td></tr>')
    return ('<table id="ab-runs-table"><thead><tr><th>run</th><th>round</th>'
            '<th class="t">policy</th><th class="t">status</th><th>exit</th>'
            '<th>median us/step</th><th class="t">per rank median us</th>'
            '<th class="t">why it failed</th></tr></thead><tbody>' + "".join(rows)
            + "</tbody></table>")


def render_ab_html(res: AbResult, out: TextIO) -> None:
    """Write the A/B page."""
    title = "profplug ab: " + " vs ".join(res.policies)
    order = f"random order, seed {res.seed}" if res.order == "random" else f"{res.order} order"
    if res.design == "switched":
        order = f"policies switched every {res.switch_every} steps inside each run"
    verdicts = "".join(f'<p class="verdict">{e(s.verdict)}</p>' for s in res.summary
                       if s.verdict)
    out_cls = "bad" if res.outputs.identical is False else "sub"
    data = plot_data(res)
    keys = legend([(data["colors"][p], p) for p in res.policies])
    body = [
        f"<h1>{e(title)}</h1>",
        f'<p class="sub">{res.rounds} rounds, {e(order)}, {len(res.runs)} runs '
        f"({len(res.failed_runs)} failed) · step time: {e(CLOCKS.get(res.clock, res.clock))}, "
        "per step the slowest rank · times in us</p>",
        verdicts,
        f'<p class="{out_cls}" id="ab-outputs">{e(outputs_line(res))}</p>',
    ]
    if res.whatif is not None:
        body.append(f'<p id="ab-whatif">{e(whatif_line(res.whatif))}</p>')
    body += [f'<p class="bad">{e(line)}</p>' for line in res.not_reached]  # ab/policy_reach.py
    body += [f'<p class="sub" id="ab-design">{e(line)}</p>' for line in design_lines(res)]
    body += [
        "<h2>Summary</h2>", _summary_table(res),
        '<p class="sub">median over rounds of each run\'s median step; 95% CI: percentile '
        "bootstrap over rounds (from 3 rounds on); speedup = device median / policy median, "
        "its CI paired by round: the wider of the bootstrap and Student's t on the per-round "
        "log ratios (docs/ab.md).</p>",
        "<h2>Step time per run</h2>"
        '<p class="sub">box: 25th-75th percentile and median of the pipeline\'s per-step '
        "time, whiskers: 5th and 95th; runs in execution order, rounds marked; dashed grey: a "
        "failed run.</p>" + keys + runs_svg(data),
        "<h2>Median step and 95% CI per policy</h2>"
        '<p class="sub">diamond: the median over rounds; bar: its 95% CI; circles: the '
        "round medians.</p>" + ci_svg(data),
        "<h2>Speedup over device and 95% CI</h2>"
        '<p class="sub">diamond: device median / policy median; bar: its 95% CI (paired by '
        "round); circles: each round's ratio; dashed: no difference.</p>" + speedup_svg(data),
        "<h2>Step-time distribution per policy</h2>"
        '<p class="sub">every step of every successful run, pooled: share of the policy\'s '
        "steps per bin"
        + ("; dashed: the what-if prediction from the traced device run (shaded: its error "
           "band; at the unprofiled device runs' host speed when calibrated), dash-dot: the "
           "prediction at the traced host speed, dotted: the traced run's recorded step"
           if res.whatif is not None else "") + ".</p>" + keys + dist_svg(data),
        "<h2>Runs</h2>", _runs_table(res),
    ]
    body += [f'<p class="sub">warning: {e(w)}</p>' for w in res.warnings]
    body.append('<h2>Command</h2><pre>' + e(" ".join(res.command)) + "</pre>")
    out.write(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{e(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(b for b in body if b) + "\n</body>\n</html>\n")
