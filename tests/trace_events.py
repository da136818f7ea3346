"""The Trace Event Format's rules, checked on a loaded trace (the merged trace's tests).

``violations(doc)`` lists every rule a Chrome trace (JSON Object Format) breaks, one line
each, empty when it keeps them all:

- ``traceEvents`` is a list of objects, each with a ``ph``; ``pid`` and ``tid`` integers;
- complete events (``X``) have a name, a ``ts`` and a ``dur >= 0``, in us with at most 3
  decimals (ns);
- every ``B`` has its ``E`` on the same thread, in order;
- flows: each id has one ``s`` and one ``f``, of one name and category; the ``f`` binds to
  its enclosing slice (``bp`` ``e``); each end lies inside a complete event of its thread;
- every process that has events is named (``process_name``) and every thread that has
  slices or flow ends (``thread_name``), and each named thread's process is named;
- the complete events of one thread nest (each one inside or apart from every other), for
  the categories ``nested`` names (profplug's own tracks: the recorded ones are as the
  trace had them).
"""

from __future__ import annotations

import bisect
import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any


def load(path: Path) -> dict[str, Any]:
    """A trace file, gzip or not."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data)


def _us(x: object) -> bool:
    return isinstance(x, (int, float)) and abs(round(x * 1000) - x * 1000) < 1e-3


OWN = ("idle.", "critical.", "step", "peer_wait")


def violations(doc: dict[str, Any], nested: tuple[str, ...] = OWN) -> list[str]:
    out: list[str] = []
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        return ["traceEvents is not a list"]
    slices: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    stacks: dict[tuple[int, int], list[str]] = defaultdict(list)
    flows: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    procs, threads, used_p, used_t = set(), set(), set(), set()
    for i, e in enumerate(events):
        ph, pid, tid = e.get("ph"), e.get("pid"), e.get("tid")
        if not isinstance(pid, int) or not isinstance(tid, int):
            out.append(f"event {i}: pid/tid not integers ({pid!r}, {tid!r})")
            continue
        if ph == "M":
            if e.get("name") == "process_name":
                procs.add(pid)
            elif e.get("name") == "thread_name":
                threads.add((pid, tid))
            continue
        used_p.add(pid)
        if ph == "X":
            if not isinstance(e.get("name"), str) or not _us(e.get("ts")) \
                    or not _us(e.get("dur")) or e["dur"] < 0:
                out.append(f"event {i}: a complete event without name, us ts or dur >= 0")
                continue
            slices[(pid, tid)].append((e["ts"], e["ts"] + e["dur"]))
            used_t.add((pid, tid))
        elif ph == "B":
            stacks[(pid, tid)].append(e.get("name", ""))
        elif ph == "E":
            if not stacks[(pid, tid)]:
                out.append(f"event {i}: an E without its B on thread {(pid, tid)}")
            else:
                stacks[(pid, tid)].pop()
        elif ph in ("s", "f"):
            flows[e.get("id")].append(e)
            used_t.add((pid, tid))
    out += [f"thread {k}: {len(v)} B without their E" for k, v in stacks.items() if v]
    out += _misnested([e for e in events if e.get("ph") == "X" and isinstance(e.get("dur"),
                       (int, float)) and str(e.get("cat", "")).startswith(nested)])
    out += _flow_violations(flows, slices)
    out += [f"process {p} has events but no process_name" for p in sorted(used_p - procs)]
    out += [f"thread {t} has events but no thread_name" for t in sorted(used_t - threads)]
    out += [f"thread {t} named in an unnamed process" for t in sorted(threads)
            if t[0] not in procs]
    return out


def _misnested(slices: list[dict[str, Any]]) -> list[str]:
    """Complete events of one thread that overlap without one holding the other."""
    by: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for e in slices:
        by[(e["pid"], e["tid"])].append((round(e["ts"] * 1000),
                                         round((e["ts"] + e["dur"]) * 1000)))
    out = []
    for key, spans in by.items():
        stack: list[int] = []
        for s, e in sorted(spans, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1] <= s:
                stack.pop()
            if stack and stack[-1] < e:
                out.append(f"thread {key}: a slice at {s / 1000} us overlaps another")
                break
            stack.append(e)
    return out


def _flow_violations(flows: dict[Any, list[dict[str, Any]]],
                     slices: dict[tuple[int, int], list[tuple[float, float]]]) -> list[str]:
    out = []
    starts = {k: sorted(v) for k, v in slices.items()}
    for fid, evs in flows.items():
        phs = sorted(e["ph"] for e in evs)
        if phs != ["f", "s"]:
            out.append(f"flow {fid}: {phs} instead of one s and one f")
            continue
        if len({(e.get("name"), e.get("cat")) for e in evs}) != 1:
            out.append(f"flow {fid}: its ends differ in name or category")
        for e in evs:
            if e["ph"] == "f" and e.get("bp") != "e":
                out.append(f"flow {fid}: its f does not bind to its enclosing slice")
            if not _inside(starts.get((e["pid"], e["tid"]), []), e["ts"]):
                out.append(f"flow {fid}: its {e['ph']} at {e['ts']} is in no slice of "
                           f"thread {(e['pid'], e['tid'])}")
    return out


def _inside(spans: list[tuple[float, float]], t: float) -> bool:
    """Whether ``t`` lies in one of ``spans`` (sorted by start)."""
    k = bisect.bisect_right(spans, (t, float("inf")))
    return any(s <= t <= e + 1e-9 for s, e in spans[max(0, k - 64):k])


def slices_of(doc: dict[str, Any], cat_prefix: str) -> list[dict[str, Any]]:
    """The complete events whose category starts with ``cat_prefix``."""
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"
            and str(e.get("cat", "")).startswith(cat_prefix)]


def names(doc: dict[str, Any], what: str = "process_name") -> dict[Any, str]:
    """pid (``process_name``) or (pid, tid) (``thread_name``) -> its name."""
    return {(e["pid"] if what == "process_name" else (e["pid"], e["tid"])): e["args"]["name"]
            for e in doc["traceEvents"] if e.get("ph") == "M" and e.get("name") == what}
