"""The figures a user reads, pulled out of every output of every command (text, JSON, CSV,
the HTML's text), so that a test can check that one figure has one value everywhere.

A figure is a key (``"pred_step"``, ``"band:traced"``, ``"sync_idle:1"``, ...) and a value as
printed (a string: its printed precision is part of it). :class:`Seen` collects them with
where each was seen; :meth:`Seen.disagreements` lists the keys whose values do not agree to
the printed precision (two values agree when they round to each other: ``|a - b|`` at most
half a unit of the last printed digit of each, summed).

Keys (``r`` a rank; a ``u:`` prefix: the same figure of a what-if calibrated on an unprofiled
step, ``--unprofiled``; ``b:``: run B of a compare):

- ``step:r``, ``run_step``: each rank's step and the run's (the slowest rank's);
- ``sync_idle:r``: GPU idle per step in device-wide synchronizes (the report's rank section
  and JSON, the what-if's recorded idle by cause; the what-if's ``direct`` and the
  headline's measured idle too, where every device-wide synchronize with idle is one the
  what-if drops);
- ``site_idle:r:SITE``: per call site, idle per step;
- ``pred_step``, ``pred_rank``, ``speedup``: the pipeline's prediction;
- ``pred:r``: each rank's predicted step;
- ``band:T`` (the pipeline's) and ``band:T:r`` (each rank's): the band for target T
  (``replay``, ``traced``, ``unprofiled``), as its label says;
- ``stream_waits:r``: cudaStreamWaitEvent calls;
- ``b_minus_a``: compare's B - A against the difference of the steps it prints.
"""

from __future__ import annotations

import html as htmllib
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

NUM = r"[+-]?\d[\d,]*(?:\.\d+)?"


def num(s: str) -> tuple[float, float]:
    """(value, half a unit of its last printed digit)."""
    s = s.replace(",", "").strip()
    dec = len(s.split(".")[1]) if "." in s else 0
    return float(s), 0.5 * 10.0 ** -dec


def jnum(x: Any) -> str:
    """A JSON number as printed (its repr: all its digits)."""
    return repr(float(x)) if x is not None else "None"


def target_of(label: str, default: str) -> str:
    """The band's target named by its label (``default``: an unlabelled band)."""
    low = re.split(r",|\(replay", label.lower())[0]
    if "replay" in low or "own error" in low:
        return "replay"
    if "unprofiled" in low:
        return "unprofiled"
    if "separate" in low:
        return "traced"
    return default


@dataclass
class Seen:
    figures: dict[str, list[tuple[str, str]]] = field(default_factory=lambda: defaultdict(list))
    broken: list[str] = field(default_factory=list)  # invariants that do not hold

    def add(self, key: str, value: Any, where: str) -> None:
        if value is None:
            return
        self.figures[key].append((where, value if isinstance(value, str) else jnum(value)))

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            self.broken.append(what)

    def disagreements(self) -> list[str]:
        out = []
        for key, vals in sorted(self.figures.items()):
            parsed = [(w, v, *num(v)) for w, v in vals]
            for w1, v1, x1, t1 in parsed:
                bad = [(w2, v2) for w2, v2, x2, t2 in parsed if abs(x1 - x2) > t1 + t2 + 1e-9]
                if bad:
                    out.append(f"{key}: {v1} ({w1}) vs " + ", ".join(f"{v} ({w})" for w, v in bad))
                    break
        return out + self.broken


# --- the headline / finding sentence, in any output ---------------------------------------

MEASURED = re.compile(r"left rank (\d+)'s GPU\s+idle (" + NUM + r") us/step")
PREDICTED = re.compile(r"Predicted with event-based\s+waits: (" + NUM + r") us/step(?: on rank"
                       r" (\d+))?[^(]*\((" + NUM + r")x[^+]*\+-(\d+)% for ([^;)]+)")


def finding(text: str, where: str, seen: Seen, ns: str, own: str, dropped_all: set[int]) -> int:
    """Every finding sentence in ``text``; returns how many there were."""
    text = re.sub(r"\s+", " ", text)
    n = 0
    for m in MEASURED.finditer(text):
        rank = int(m.group(1))
        key = f"{ns}sync_idle:{rank}" if rank in dropped_all else f"{ns}dropped_idle:{rank}"
        seen.add(key, m.group(2), where)
        n += 1
    for m in PREDICTED.finditer(text):
        seen.add(f"{ns}pred_step", m.group(1), where)
        if m.group(2):
            seen.add(f"{ns}pred_rank", m.group(2), where)
        seen.add(f"{ns}speedup", m.group(3), where)
        seen.add(f"{ns}band:{target_of(m.group(5), own) if not ns else 'unprofiled'}",
                 m.group(4), where)
        seen.check(not ns or "unprofiled" in m.group(5),
                   f"{where}: a calibrated prediction's band labelled {m.group(5)!r}")
    return n


# --- the report -----------------------------------------------------------------------------

def report_json(doc: dict[str, Any], where: str, seen: Seen, ns: str = "") -> None:
    seen.add(f"{ns}run_step", doc.get("step", {}).get("us"), where)
    if doc.get("headline"):
        finding(doc["headline"], where + " headline", seen, ns, "traced", dropped_all(doc))
    top = doc.get("predicted_step") or {}
    if top.get("us") is not None and not top.get("nothing_to_drop"):
        seen.add(f"{ns}pred_step", top["us"], where + " predicted_step")
    for r in doc["ranks"]:
        k = r["rank"]
        st = r.get("steps") or {}
        if st.get("n_steps"):
            seen.add(f"{ns}step:{k}", st["period_us"], where)
            seen.add(f"{ns}sync_idle:{k}", st["idle_per_step_us"]["device_sync"], where)
        for c in r.get("callsites") or []:
            if c.get("idle_per_step_us") is not None:
                seen.add(f"{ns}site_idle:{k}:{c['callsite']}", c["idle_per_step_us"], where)
        for s in r.get("syncs") or []:
            if s["kind"] == "stream_wait":
                seen.add(f"{ns}stream_waits:{k}", str(s["count"]), where)
    if doc.get("whatif"):
        whatif_json(doc["whatif"], where, seen, ns, dropped_all(doc))


def dropped_all(doc: dict[str, Any]) -> set[int]:
    """The ranks where every device-wide synchronize call site with idle is a pipeline
    send/recv (dropped by the default what-if): its direct idle is the rank's sync idle."""
    out = set()
    for r in doc["ranks"]:
        sites = [c for c in r.get("callsites") or [] if "DeviceSynchronize" in c["api"]
                 and (c.get("idle_caused_us") or 0) > 0]
        if sites and all(re.search(r"send_to_next|recv_from_prev", c["callsite"])
                         for c in sites):
            out.add(r["rank"])
    return out


def whatif_json(w: dict[str, Any], where: str, seen: Seen, ns: str,
                dropped: set[int]) -> None:
    own = "unprofiled" if ns else "traced"
    p = w.get("predicted_step") or {}
    if p.get("nothing_to_drop"):
        return
    seen.add(f"{ns}pred_step", p.get("us"), where)
    seen.add(f"{ns}pred_rank", None if p.get("rank") is None else str(p["rank"]), where)
    if p.get("band_pct") is not None:
        seen.add(f"{ns}band:{p.get('target', own)}", p["band_pct"], where)
    seen.add(f"{ns}speedup", p.get("speedup"), where)
    for r in w["ranks"]:
        k = r["rank"]
        seen.add(f"{ns}pred:{k}", r["predicted_us"], where)
        if not ns:
            seen.add(f"band:replay:{k}", r.get("error_band_pct"), where)
            seen.add(f"band:traced:{k}", r.get("run_band_pct"), where)
            key = f"sync_idle:{k}" if k in dropped else f"dropped_idle:{k}"
            seen.add(key, r["direct_us"], where)
            seen.add(f"sync_idle:{k}", r["recorded_idle_by_cause_us"].get("device_sync"), where)
        else:
            if "band_pct" in r:
                seen.add(f"u:band:{k}", r["band_pct"], where)
            for c, v in r["recorded_idle_by_cause_us"].items():
                seen.check(v <= r["recorded_us"] + 0.05,
                           f"{where}: rank {k} {c} idle {v} us/step inside a "
                           f"{r['recorded_us']} us step")


RANK_SECTION = re.compile(r"── rank (\d+) ─")
IDLE_PER_STEP = re.compile(r"idle per\s+step:\s+(?:none|device_sync (" + NUM + r"))")
STREAM_WAITS = re.compile(r"^stream waits: (\d[\d,]*)", re.M)
SYNC_ROW = re.compile(r"^cudaStreamWaitEvent\s+stream_wait\s+(\d[\d,]*)", re.M)
SITE_ROW = re.compile(r"^(\S.*?)\s{2,}(\d[\d,]*)\s+(" + NUM + r")\s+(" + NUM + r"|-)$", re.M)
STEP_LINE = re.compile(r"the run's step: (" + NUM + r") us")
WHATIF_ROW = re.compile(r"^\s*(\d+) (step|win)\s+(" + NUM + r")\s+(" + NUM + r")\s+(" + NUM +
                        r")\s+(" + NUM + r")\s+(" + NUM + r"|n/a)\s+(" + NUM + r")\s+(" + NUM +
                        r")\s+(" + NUM + r")\s+(" + NUM + r")$", re.M)
CAUSES_FLAT = re.compile(r"(\d+) device_sync (" + NUM + r")->\S+ event_sync (" + NUM +
                         r")->\S+ host_bound (" + NUM + r")->\S+ other (" + NUM + r")->")
CAUSE_ROW = re.compile(r"^\s+(\d+) device_sync (" + NUM + r")->", re.M)
REPLAY_BANDS = re.compile(r"band for the same run replayed \(the model's own error\): (.*?) \(")
SEPARATE_BANDS = re.compile(r"band for a separate run: (.*?) \(")
RANK_BAND = re.compile(r"rank (\d+) \+-(" + NUM + r")%")


def report_text(text: str, where: str, seen: Seen, dropped: set[int]) -> None:
    """The report's (or the what-if's) table: headline, rank sections, what-if table."""
    n = finding(text, where, seen, "", "traced", dropped)
    seen.check(n <= 1, f"{where}: {n} headlines")
    m = STEP_LINE.search(text)
    if m:
        seen.add("run_step", m.group(1), where)
    parts = RANK_SECTION.split(text)
    for i in range(1, len(parts) - 1, 2):
        k, body = int(parts[i]), parts[i + 1].split("\nprofplug what-if")[0]
        m = IDLE_PER_STEP.search(re.sub(r"\s+", " ", body))
        if m:
            seen.add(f"sync_idle:{k}", m.group(1) or "0", where)
        for rx in (STREAM_WAITS, SYNC_ROW):
            m = rx.search(body)
            if m:
                seen.add(f"stream_waits:{k}", m.group(1).replace(",", ""), where)
        if "costliest call sites" in body:
            table = body.split("costliest call sites")[1]
            for m in SITE_ROW.finditer(table):
                if m.group(4) != "-" and not m.group(1).startswith(" "):
                    seen.add(f"site_idle:{k}:{m.group(1).strip()}", m.group(4), where)
    whatif_text(text, where, seen, "", dropped)


def whatif_text(text: str, where: str, seen: Seen, ns: str, dropped: set[int]) -> None:
    if "profplug what-if" not in text:
        return
    body = text.split("profplug what-if", 1)[1].split("\nagainst ", 1)[0]
    flat = re.sub(r"\s+", " ", body)
    recorded: dict[int, str] = {}
    own = "unprofiled" if ns else target_of(
        flat.split("+-%:", 1)[1][:60] if "+-%:" in flat else "", "traced")
    for m in WHATIF_ROW.finditer(body):
        k = int(m.group(1))
        seen.add(f"{ns}pred:{k}", m.group(6), where)
        if m.group(7) != "n/a":
            seen.add(f"{ns}band:{own}:{k}" if not ns else f"u:band:{k}", m.group(7), where)
        if not ns:
            key = f"sync_idle:{k}" if k in dropped else f"dropped_idle:{k}"
            seen.add(key, m.group(10), where)
        recorded[k] = m.group(3)
    causes = flat.split("recorded -> predicted", 1)[-1].split("assumptions")[0]
    for m in CAUSES_FLAT.finditer(causes):
        k = int(m.group(1))
        for v in m.group(2, 3, 4, 5):
            if ns and k in recorded:
                seen.check(num(v)[0] <= num(recorded[k])[0] + 0.05,
                           f"{where}: rank {k} idle {v} us/step inside a recorded step of "
                           f"{recorded[k]} us")
    for m in CAUSE_ROW.finditer(body):
        if not ns:
            seen.add(f"sync_idle:{m.group(1)}", m.group(2), where)
    for rx, t in ((REPLAY_BANDS, "replay"), (SEPARATE_BANDS, "traced")):
        m = rx.search(flat)
        if m and not ns:
            for b in RANK_BAND.finditer(m.group(1)):
                seen.add(f"band:{t}:{b.group(1)}", b.group(2), where)


AGAINST_ROW = re.compile(r"^\s*(\d+)\s+(" + NUM + r"|-)\s+(" + NUM + r")\s+(" + NUM + r"|-)\s+("
                         + NUM + r"|-)\s+(yes|no|-)\s", re.M)


def against_text(text: str, where: str, seen: Seen) -> None:
    """The against section (``whatif --against``, ``compare``): its band is for a separate
    traced run, and inside is judged with it."""
    if "(measured): the prediction lined up" not in text:
        return
    body = text.split("(measured): the prediction lined up", 1)[1]
    for m in AGAINST_ROW.finditer(body.split("\n\n")[0]):
        k = int(m.group(1))
        if m.group(2) == "-":
            continue
        seen.add(f"pred:{k}", m.group(2), where)
        seen.add(f"band:traced:{k}", m.group(3), where)
        if m.group(4) != "-" and m.group(6) != "-":
            p, b, meas = num(m.group(2))[0], num(m.group(3))[0], num(m.group(4))[0]
            inside = p * (1 - b / 100) <= meas <= p * (1 + b / 100)
            seen.check(inside == (m.group(6) == "yes"),
                       f"{where}: rank {k} inside={m.group(6)} with +-{b}%")


def against_json(a: dict[str, Any], where: str, seen: Seen) -> None:
    for r in a["ranks"]:
        if r["predicted_us"] is not None:
            seen.add(f"pred:{r['rank']}", r["predicted_us"], where)
            seen.add(f"band:traced:{r['rank']}", r["band_pct"], where)


def csv_report(text: str, where: str, seen: Seen) -> None:
    lines = text.strip().splitlines()
    head = lines[0].split(",")
    for line in lines[1:]:
        row = dict(zip(head, line.split(","), strict=False))
        if row.get("step_us"):
            seen.add(f"step:{row['rank']}", row["step_us"], where)


def page_text(page: str) -> str:
    """The HTML page's text as a reader sees it (no scripts, tags or entities)."""
    page = re.sub(r"<script.*?</script>|<style.*?</style>", " ", page, flags=re.S)
    return htmllib.unescape(re.sub(r"<[^>]+>", " ", page))


def answer_text(text: str, where: str, seen: Seen, target: str) -> bool:
    """compare's answer: "X's what-if predicted P us/step (±B%: ...)"; whether it is there."""
    m = re.search(r"what-if predicted (" + NUM + r") us/step \(±(\d+)%", re.sub(r"\s+", " ", text))
    if m:
        ns = "u:" if target == "unprofiled" else ""
        seen.add(f"{ns}pred_step", m.group(1), where)
        seen.add(f"{ns}band:{target}", m.group(2), where)
    return m is not None


def compare_steps(text: str, where: str, seen: Seen) -> None:
    """compare's B - A (when its verdict gives one) against the two steps it prints (that
    line must be there: a changed wording fails here rather than leave them unchecked)."""
    flat = re.sub(r"\s+", " ", text)
    m = re.search(r"the run's step: A (" + NUM + r") us/step.*? vs B (" + NUM + r") us/step",
                  flat)
    d = re.search(r"B - A = (" + NUM + r") us", flat)
    if m:
        seen.add("run_step", m.group(1), where)
        seen.add("b:run_step", m.group(2), where)
    seen.check(bool(m), f"{where}: no \"the run's step: A ... vs B ...\" line to check")
    if m and d:
        dec = max(len(x.split(".")[1]) if "." in x else 0 for x in m.group(1, 2))
        a, b = num(m.group(1))[0], num(m.group(2))[0]
        seen.add("b_minus_a", d.group(1), where)
        seen.add("b_minus_a", f"{b - a:.{dec}f}", where + " (B - A of its printed steps)")


def ab_line(text: str, where: str, seen: Seen) -> None:
    flat = re.sub(r"\s+", " ", text)
    m = re.search(r"predicted (" + NUM + r") us/step(?: on rank (\d+))? \+-(\d+)%", flat)
    if m:
        seen.add("u:pred_step", m.group(1), where)
        if m.group(2):
            seen.add("u:pred_rank", m.group(2), where)
        seen.add("u:band:unprofiled", m.group(3), where)
    s = re.search(r"speedup predicted (" + NUM + r")x", flat)
    if s:
        seen.add("u:speedup", s.group(1), where)


def ab_json(doc: dict[str, Any], where: str, seen: Seen) -> None:
    w = doc.get("whatif") or {}
    if not w or w.get("nothing_to_drop"):
        return
    seen.add("u:pred_step", w.get("predicted_step_us"), where)
    if w.get("predicted_rank") is not None:
        seen.add("u:pred_rank", str(w["predicted_rank"]), where)
    seen.add("u:band:unprofiled", w.get("band_pct"), where)
    seen.add("u:speedup", w.get("predicted_speedup"), where)
