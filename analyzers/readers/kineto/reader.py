"""Kineto (torch.profiler) Chrome-trace reader: ``.json`` / ``.json.gz`` -> :class:`Timeline`.

Events stream through in typed batches (``kineto_stream``, ``jsonchunks``: linear time,
bounded memory, a bad event skipped and counted, a cut-short file read up to its last
complete event) and become timeline rows batch by batch; the rows are packed into numpy arrays every ``FLUSH_ROWS``, so
memory grows by ~50 bytes per kept event (kernels, API calls, annotations, syncs, steps).

Times: Kineto's ``ts``/``dur`` are microseconds (3 decimals = ns). Recent torch writes
``ts`` relative to ``baseTimeNanoseconds``; older torch wrote integer epoch microseconds.
Both become absolute int64 nanoseconds.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
from profplug.analyzers.core.memtrim import trim
from profplug.analyzers.core.timeline import (
    KIND_KERNEL,
    KIND_MEMCPY,
    KIND_MEMSET,
    STEP_RE,
    SYNC_CONTEXT_SYNC,
    SYNC_EVENT_SYNC,
    SYNC_STREAM_SYNC,
    SYNC_STREAM_WAIT_EVENT,
    Timeline,
    TimelineBuilder,
)
from profplug.analyzers.readers import commops
from profplug.analyzers.readers.kineto.decode import Event, Header
from profplug.analyzers.readers.kineto.stream import EventStream
from profplug.analyzers.readers.limits import max_decompressed
from profplug.analyzers.steps.rule import DEFAULT_STEPS, StepRule, apply_steps

MAX_EVENT_DUR_US = 3.6e9  # one hour: longer events are CUPTI timestamp garbage
EPOCH_US_THRESHOLD = 1e14  # ts above this is epoch microseconds, not relative to a base
# Times stay within +-2^62 ns (year 2116), so no sum or difference of two overflows int64.
MAX_EPOCH_TS_US = 4.6e15  # epoch ts (us) beyond this is out of range
MAX_BASE_NS = (1 << 62) - 10**17  # base + relative ts (< 1e17 ns) stays within 2^62
MAX_DIGITS = 18  # a step number, pid or tid with more digits does not fit int64
FLUSH_ROWS = 1 << 14  # rows kept in Python lists before they are packed into numpy (a
# Python int is ~36 bytes a row: 2^14 rows of 12 columns ~7 MB, against ~110 MB at 2^18)
OUT_OF_RANGE = "timestamp out of range"
MIXED = "timestamp style unlike the trace's (epoch vs relative us)"
BEGIN_END = "begin/end pair (ph B/E), not read"

GPU_CATS = {"kernel": KIND_KERNEL, "gpu_memcpy": KIND_MEMCPY, "gpu_memset": KIND_MEMSET}
API_CATS = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver", "runtime",
                      "driver"})
ANN_CATS = frozenset({"user_annotation"})
# B/E pairs of what the analysis reads (API calls, GPU ops, syncs, annotations): counted as
# skipped, not read (torch writes X events; a B/E sync was ignored silently)
BE_CATS = frozenset({*GPU_CATS, *API_CATS, *ANN_CATS, "cuda_sync"})
SYNC_KINDS = {"Event Sync": SYNC_EVENT_SYNC, "Stream Wait Event": SYNC_STREAM_WAIT_EVENT,
              "Stream Sync": SYNC_STREAM_SYNC, "Context Sync": SYNC_CONTEXT_SYNC}
PARAM_COMMS = "record_param_comms"  # torch's cpu_op describing a NCCL call (commops)
RANK_IN_NAME = re.compile(r"rank[_\-.]?(\d+)", re.IGNORECASE)


def _as_int(x: int | str, default: int = -1) -> int:
    """An int field, or the first integer in a string one; ``default`` when none fits int64."""
    if isinstance(x, int):
        return x
    m = re.search(r"-?[0-9]+", x)
    if m is None or len(m.group().lstrip("-")) > MAX_DIGITS:
        return default
    return int(m.group())


_NARROW = {"gpu_kind": np.int8, "gsync_kind": np.int8, "gpu_name": np.int32,
           "api_name": np.int32, "ann_name": np.int32}


class _Rows:
    """Turns decoded events into timeline rows, one chunk of events at a time.

    Start/end are kept without the ``baseTimeNanoseconds`` offset (it may only be known at
    the end of the file) and shifted once, as arrays, by :meth:`finish`.
    """

    def __init__(self) -> None:
        self.b = TimelineBuilder()
        self.skipped: dict[str, int] = {}
        self.relative: bool | None = None  # ts relative to the base (else epoch us)
        self.has_sync = False
        self.sync_event: list[int] = []  # per gsync row: wait_on_cuda_event_id, -1 none
        self.packed: dict[str, list[np.ndarray]] = {k: [] for k in self.b.cols}

    def pack(self) -> None:
        """Move every column's rows from its Python list into a numpy array (~8 bytes a
        value instead of ~36)."""
        for k, v in self.b.cols.items():
            if v:
                self.packed[k].append(np.array(v, dtype=_NARROW.get(k, np.int64)))
                v.clear()

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def feed(self, events: list[Event]) -> None:
        b = self.b
        if self.relative is None:  # the style of most timestamps in the first batch
            stamps = [e.ts for e in events if e.ts is not None and e.ph == "X"]
            if not stamps:
                return
            self.relative = 2 * sum(ts >= EPOCH_US_THRESHOLD for ts in stamps) < len(stamps)
        relative = self.relative
        gpu_cats = GPU_CATS
        c = b.cols
        gs, ge, gd, gst, gk, gn, gc = (c["gpu_start_ns"], c["gpu_end_ns"], c["gpu_device"],
                                       c["gpu_stream"], c["gpu_kind"], c["gpu_name"],
                                       c["gpu_corr"])
        as_, ae, at, an, ac = (c["api_start_ns"], c["api_end_ns"], c["api_tid"],
                               c["api_name"], c["api_corr"])
        sym, ids = b.sym, b._ids
        lower: dict[str, str] = {}
        for e in events:
            if e.ph != "X":
                if e.ph == "B" and e.cat.lower() in BE_CATS:  # a pair counted once, at B
                    self.skip(BEGIN_END)
                continue
            ts, dur = e.ts, e.dur
            if ts is None or dur is None:
                self.skip("missing ts/dur")
                continue
            if not 0 <= dur <= MAX_EVENT_DUR_US:  # also NaN
                self.skip("negative or absurd duration")
                continue
            if not (-EPOCH_US_THRESHOLD < ts < EPOCH_US_THRESHOLD if relative
                    else EPOCH_US_THRESHOLD <= ts < MAX_EPOCH_TS_US):  # or NaN
                # the other style (a mixed trace would make a 10^15 us window), or int64 ns
                # overflow
                other = EPOCH_US_THRESHOLD <= ts < MAX_EPOCH_TS_US if relative \
                    else -EPOCH_US_THRESHOLD < ts < EPOCH_US_THRESHOLD
                self.skip(MIXED if other else OUT_OF_RANGE)
                continue
            cat = lower.get(e.cat)
            if cat is None:
                cat = lower[e.cat] = e.cat.lower()
            if cat == "cpu_op" and not (e.name.startswith("ProfilerStep#")
                                        or e.name == PARAM_COMMS):
                continue  # the most common event; only steps and comm params matter
            if relative:
                start = round(ts * 1000)  # ts: a float, or a Decimal (exact decoding)
            else:  # epoch us: keep ns exact beyond float64's 2**53
                whole = int(ts)
                start = whole * 1000 + round((ts - whole) * 1000)
            end = start + round(dur * 1000.0)
            args = e.args
            kind = gpu_cats.get(cat)
            if kind is not None:
                dev = args.device if args is not None and args.device is not None \
                    else _as_int(e.pid)
                stream = args.stream if args is not None and args.stream is not None \
                    else _as_int(e.tid)
                corr = args.correlation if args is not None and args.correlation is not None \
                    else -1
                gs.append(start)
                ge.append(end)
                gd.append(dev)
                gst.append(stream)
                gk.append(kind)
                name_id = ids.get(e.name)
                gn.append(sym(e.name) if name_id is None else name_id)
                gc.append(corr)
            elif cat in API_CATS:
                corr = args.correlation if args is not None and args.correlation is not None \
                    else -1
                tid = e.tid
                name_id = ids.get(e.name)
                as_.append(start)
                ae.append(end)
                at.append(tid if type(tid) is int else _as_int(tid))
                an.append(sym(e.name) if name_id is None else name_id)
                ac.append(corr)
            elif cat in ANN_CATS or cat == "cpu_op":
                self._annotation(e, cat, start, end)
            elif cat == "cuda_sync":
                self._gsync(e, start, end)
        if len(gs) >= FLUSH_ROWS or len(as_) >= FLUSH_ROWS \
                or len(c["ann_start_ns"]) >= FLUSH_ROWS or len(c["gsync_start_ns"]) >= FLUSH_ROWS:
            self.pack()

    def _annotation(self, e: Event, cat: str, start: int, end: int) -> None:
        """Every user annotation, and the ``ProfilerStep#N`` cpu_ops (the step rule, applied
        in :meth:`finish`, picks the steps among them); a ``record_param_comms`` cpu_op is a
        ``comm_*`` row (``commops``), not an annotation."""
        if cat == "cpu_op" and not STEP_RE.match(e.name):
            desc = commops.param_comms(e.args) if e.name == PARAM_COMMS else None
            if desc is not None:
                self.b.comm(start, end, _as_int(e.tid), desc.kind, desc.peer,
                            commops.group_text(desc.group), desc.seq, desc.name, desc.src)
            return
        self.b.ann(start, end, _as_int(e.tid), e.name)

    def _gsync(self, e: Event, start: int, end: int) -> None:
        self.has_sync = True
        args = e.args
        kind_s = args.cuda_sync_kind if args is not None else None
        skind = SYNC_KINDS.get(kind_s or e.name)
        if skind is None:
            self.skip("unknown cuda_sync kind")
            return

        def arg(name: str) -> int:
            v = getattr(args, name) if args is not None else None
            return -1 if v is None else v

        dev = args.device if args is not None and args.device is not None else _as_int(e.pid)
        self.b.gsync(start, end, skind, dev, arg("stream"), arg("correlation"),
                     arg("wait_on_stream"), arg("wait_on_cuda_event_record_corr_id"))
        self.sync_event.append(arg("wait_on_cuda_event_id"))

    def finish(self, path: Path, header: Header, file_index: int,
               steps: StepRule = DEFAULT_STEPS) -> Timeline:
        base = header.baseTimeNanoseconds or 0
        relative = bool(self.relative)
        dist = header.distributedInfo or {}
        rank, rule = _rank_of(path, dist, file_index)
        if any(self.packed.values()):
            self.pack()
            for k, parts in self.packed.items():
                self.b.cols[k] = np.concatenate(parts) if parts else []  # type: ignore[assignment]
                parts.clear()  # one column's parts at a time: the peak is not twice the rank
            trim()  # the freed parts and decoded events: the nesting sort starts from the rank
        tl = self.b.build(rank=rank, source="kineto", files=[str(path)], rank_rule=rule,
                          has_gpu_sync_records=self.has_sync,
                          metadata={"distributedInfo": dist,
                                    "deviceProperties": header.deviceProperties or [],
                                    "baseTimeNanoseconds": base,
                                    # clocks.py: wall clock, or this rank's own
                                    "clock": "epoch" if base or not relative else "own"})
        if relative and base:
            for name in TIME_COLUMNS:
                getattr(tl, name)[...] += base
        link_stream_waits(tl, np.array(self.sync_event, dtype=np.int64))
        self.sync_event = []
        apply_steps(tl, steps)
        tl.api_tops()  # the nesting column, once
        tl.skipped.update(self.skipped)
        commops.add_annotation_ops(tl)
        if relative and not header.baseTimeNanoseconds:
            tl.warnings.append("no baseTimeNanoseconds: times are relative to this rank's own "
                               "base, not comparable across ranks")
        return tl


RECORD_CALLS = ("cudaEventRecord", "cudaEventRecordWithFlags", "hipEventRecord",
                "hipEventRecordWithFlags")
WAIT_CALLS = ("cudaStreamWaitEvent", "hipStreamWaitEvent")


def link_stream_waits(tl: Timeline, event_id: np.ndarray) -> int:
    """Fill ``gsync_wait_corr`` of the stream waits whose record correlation is missing;
    returns how many were linked.

    torch 2.11's Kineto writes every ``Stream Wait Event`` with
    ``wait_on_cuda_event_record_corr_id: -1`` and ``wait_on_stream: -1``, but with
    ``wait_on_cuda_event_id`` (``event_id``, per gsync row). Its ``cudaEventRecord`` /
    ``cudaEventRecordWithFlags`` calls carry only ``cbid`` and ``correlation``: no event id,
    no stream, and there is no GPU-side record of the record. So:

    - the record is the last ``cudaEventRecord*`` call on the waiting call's own host thread
      started before the ``cudaStreamWaitEvent`` call (same correlation as the wait);
    - unless that record call was already taken by an earlier wait on another event id
      (then it is not this event's record: the wait stays unlinked and is counted so);
    - ``gsync_wait_stream`` stays -1: the trace does not say which stream the record was on.

    Checked against Nsight Systems exports of the same workloads, whose CUDA_EVENT table has
    the record's event id and stream (``sample_traces/*nsys``, 668 stream waits): the rule
    picks the true record in 628, and in the other 40 a record on the same stream right after
    it with no op launched in between (the same awaited work). The stream of the op launched
    last before the record, the other candidate, is not the record's stream in about a third
    of them, so it is not used.
    """
    if tl.gsync_kind.size == 0 or tl.api_corr.size == 0:
        return 0
    sel = np.nonzero((tl.gsync_kind == SYNC_STREAM_WAIT_EVENT) & (tl.gsync_wait_corr < 0)
                     & (tl.gsync_corr >= 0))[0]
    if sel.size == 0:
        return 0
    ids = {i for i, n in enumerate(tl.names) if n in RECORD_CALLS}
    wids = {i for i, n in enumerate(tl.names) if n in WAIT_CALLS}
    if not ids or not wids:
        return 0
    is_wait = np.isin(tl.api_name, list(wids))
    w_rows = np.nonzero(is_wait)[0]
    order = np.argsort(tl.api_corr[w_rows], kind="stable")
    w_corr = tl.api_corr[w_rows][order]
    w_rows = w_rows[order]
    if w_corr.size == 0:
        return 0
    k = np.minimum(np.searchsorted(w_corr, tl.gsync_corr[sel]), w_corr.size - 1)
    has = w_corr[k] == tl.gsync_corr[sel]  # the wait's own call
    sel, call = sel[has], w_rows[k[has]]
    if sel.size == 0:
        return 0
    # record calls and the waits' calls, sorted by (thread, start); a wait's record is the
    # last record call before it in its thread's block
    rec = np.nonzero(np.isin(tl.api_name, list(ids)))[0]
    if rec.size == 0:
        return 0
    r_ord = np.lexsort((rec, tl.api_start_ns[rec], tl.api_tid[rec]))
    rec = rec[r_ord]
    r_tid, r_t = tl.api_tid[rec], tl.api_start_ns[rec]
    q_tid, q_t = tl.api_tid[call], tl.api_start_ns[call]
    j = np.full(sel.size, -1, dtype=np.int64)
    for t in np.unique(q_tid).tolist():
        a, b = np.searchsorted(r_tid, t, "left"), np.searchsorted(r_tid, t, "right")
        qi = np.nonzero(q_tid == t)[0]
        jj = np.searchsorted(r_t[a:b], q_t[qi], side="left") - 1
        j[qi] = np.where(jj >= 0, a + jj, -1)
    ev = event_id[sel] if event_id.size == tl.gsync_kind.size else np.full(sel.size, -1)
    # one event id per record call: the first wait (in host order) that takes it says which;
    # a later wait on another id does not link to it
    w_ord = np.lexsort((q_t, j))
    owner: dict[int, int] = {}
    ok = j >= 0
    for i in w_ord.tolist():
        r = int(j[i])
        if r < 0:
            continue
        e = int(ev[i])
        first = owner.setdefault(r, e)
        if e >= 0 and first >= 0 and e != first:
            ok[i] = False
    tl.gsync_wait_corr[sel[ok]] = tl.api_corr[rec[j[ok]]]
    return int(ok.sum())


TIME_COLUMNS = tuple(n for n in Timeline._ARRAYS if n.endswith("_ns"))


def _to_timeline(path: Path, header: Header, events: list[Event], *, file_index: int,
                 steps: StepRule = DEFAULT_STEPS) -> Timeline:
    rows = _Rows()
    rows.feed(events)
    return rows.finish(path, header, file_index, steps)


def _rank_of(path: Path, dist: dict[str, Any], file_index: int) -> tuple[int, str]:
    r = dist.get("rank")
    if isinstance(r, int) and not isinstance(r, bool) and 0 <= r < 2**31:
        return r, "distributedInfo.rank"
    m = RANK_IN_NAME.search(path.name)
    if m:
        return int(m.group(1)), "rank in file name"
    return file_index, "file order (no distributedInfo.rank, no rank in the file name)"


def read_kineto(path: str | Path, file_index: int = 0, steps: StepRule = DEFAULT_STEPS,
                max_bytes: int | None = None) -> Timeline:
    """Read one Kineto trace file into a Timeline; raises TraceError with a one-line reason.

    ``steps``: which host ranges are steps (``steprule``; default ``ProfilerStep#N``, else
    ``profplug.step``). ``max_bytes``: the most a ``.gz`` may inflate to (``--max-decompressed``;
    None: ``$PROFPLUG_MAX_DECOMPRESSED``, else 2 GiB).

    Streams the file (memory ~ one block plus ~50 bytes per kept event), inflating a .gz
    within that budget; bad events are skipped and counted, a cut-short file is read up to
    its last complete event with a warning.
    """
    p = Path(path)
    stream = EventStream(p, max_decompressed() if max_bytes is None else max_bytes)
    rows = _Rows()
    for batch in stream:
        rows.feed(batch)
        del batch  # one batch of events alive at a time
    header, notes = header_from(stream.fields)
    tl = rows.finish(p, header, file_index, steps)
    tl.warnings[:0] = stream.warnings + notes
    for reason, n in stream.skipped.items():
        tl.skip(reason, n)
    return tl


def header_from(fields: dict[str, Any]) -> tuple[Header, list[str]]:
    """The header fields that have the right type and range; warnings for the others."""
    notes: list[str] = []
    dist = fields.get("distributedInfo")
    if dist is not None and not isinstance(dist, dict):
        notes.append("distributedInfo is not an object: ignored")
        dist = None
    props = fields.get("deviceProperties")
    if props is not None and not isinstance(props, list):
        props = None
    base = fields.get("baseTimeNanoseconds")
    if base is not None and not (type(base) is int and 0 <= base <= MAX_BASE_NS):
        notes.append(f"baseTimeNanoseconds {str(base)[:40]} out of range (0 .. {MAX_BASE_NS}):"
                     " ignored")
        base = None
    return Header(distributedInfo=dist, deviceProperties=props, baseTimeNanoseconds=base,
                  schemaVersion=fields.get("schemaVersion")), notes

