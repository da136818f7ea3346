"""Kineto (torch.profiler) Chrome-trace reader: ``.json`` / ``.json.gz`` -> :class:`Timeline`.

Events stream through in typed batches (``kineto.stream``, ``kineto.chunks``: linear time,
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
from types import MappingProxyType
from typing import Any

import numpy as np
from profplug.analyzers.core.errors import TraceError
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
from profplug.analyzers.readers.kineto.decode import Args, Event, Header
from profplug.analyzers.readers.kineto.stream import EventStream
from profplug.analyzers.readers.kineto.waitlinks import link_stream_waits
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

GPU_CATS = MappingProxyType({"kernel": KIND_KERNEL, "gpu_memcpy": KIND_MEMCPY, "gpu_memset": KIND_MEMSET})
API_CATS = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver", "runtime",
                      "driver"})
ANN_CATS = frozenset({"user_annotation"})
# B/E pairs of what the analysis reads (API calls, GPU ops, syncs, annotations): counted as
# skipped, not read (torch writes X events; a B/E sync was ignored silently)
BE_CATS = frozenset({*GPU_CATS, *API_CATS, *ANN_CATS, "cuda_sync"})
# Categories only torch.profiler writes: a Chrome-format trace with none of them and no Kineto
# header (a Chrome DevTools performance trace, say) is another tool's, not a run without GPU work
KINETO_CATS = frozenset({*BE_CATS, "cpu_op", "python_function", "gpu_user_annotation",
                         "cpu_instant_event", "overhead", "ac2g", "fwdbwd", "trace",
                         "cuda_profiler_range", "kineto", "gpu_op"})
SYNC_KINDS = MappingProxyType({"Event Sync": SYNC_EVENT_SYNC, "Stream Wait Event": SYNC_STREAM_WAIT_EVENT,
                               "Stream Sync": SYNC_STREAM_SYNC, "Context Sync": SYNC_CONTEXT_SYNC})
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


_NARROW = MappingProxyType({"gpu_kind": np.int8, "gsync_kind": np.int8, "gpu_name": np.int32,
                            "api_name": np.int32, "ann_name": np.int32})
_GPU_COLUMNS = ("gpu_start_ns", "gpu_end_ns", "gpu_device", "gpu_stream", "gpu_kind",
                "gpu_name", "gpu_corr")
_API_COLUMNS = ("api_start_ns", "api_end_ns", "api_tid", "api_name", "api_corr")
_FLUSH_BY = ("gpu_start_ns", "api_start_ns", "ann_start_ns", "gsync_start_ns")
_NO_ARGS = Args()  # an event without args: every field None


def _relative_style(events: list[Event]) -> bool | None:
    """Whether most complete events' ts are relative to a base (else epoch us); None: no
    complete event with a ts to tell."""
    stamps = [e.ts for e in events if e.ts is not None and e.ph == "X"]
    if not stamps:
        return None
    return 2 * sum(ts >= EPOCH_US_THRESHOLD for ts in stamps) < len(stamps)


def _skip_reason(ts: float | None, dur: float | None, relative: bool) -> str:
    """Why an event's ts (us) or dur (us) is refused: missing, a duration out of range, a
    ts in the other style (a mixed trace would make a 10^15 us window), or out of range
    (int64 ns would overflow)."""
    if ts is None or dur is None:
        return "missing ts/dur"
    if not 0 <= dur <= MAX_EVENT_DUR_US:  # also NaN
        return "negative or absurd duration"
    other = EPOCH_US_THRESHOLD <= ts < MAX_EPOCH_TS_US if relative \
        else -EPOCH_US_THRESHOLD < ts < EPOCH_US_THRESHOLD
    return MIXED if other else OUT_OF_RANGE


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
        self.kineto_seen = False  # an event of a Kineto category (KINETO_CATS)
        self.other_cats: dict[str, int] = {}  # until then: the other categories seen

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
        """Rows from one batch of decoded events: GPU ops, runtime calls, annotations (steps
        and comm params among the cpu_ops), GPU-side syncs; the rest skipped with a reason
        or (other cpu_ops, metadata) left out. Times in ns, before the base is added."""
        if self.relative is None:
            self.relative = _relative_style(events)
            if self.relative is None:
                return
        relative, gpu_cats = self.relative, GPU_CATS
        c = self.b.cols
        gs, ge, gd, gst, gk, gn, gc = (c[k] for k in _GPU_COLUMNS)
        as_, ae, at, an, ac = (c[k] for k in _API_COLUMNS)
        sym, ids = self.b.sym, self.b._ids
        lower: dict[str, str] = {}
        for e in events:
            if e.ph != "X":
                if e.ph == "B" and e.cat.lower() in BE_CATS:  # a pair counted once, at B
                    self.skip(BEGIN_END)
                continue
            if not self.kineto_seen:
                self._note_category(e.cat)
            ts, dur = e.ts, e.dur
            if ts is None or dur is None or not 0 <= dur <= MAX_EVENT_DUR_US or not (
                    -EPOCH_US_THRESHOLD < ts < EPOCH_US_THRESHOLD if relative
                    else EPOCH_US_THRESHOLD <= ts < MAX_EPOCH_TS_US):  # NaN too
                self.skip(_skip_reason(ts, dur, relative))
                continue
            cat = lower.get(e.cat) or lower.setdefault(e.cat, e.cat.lower())
            if cat == "cpu_op" and not (e.name.startswith("ProfilerStep#")
                                        or e.name == PARAM_COMMS):
                continue  # the most common event; only steps and comm params matter
            if relative:
                start = round(ts * 1000)  # ts: a float, or a Decimal (exact decoding)
            else:  # epoch us: keep ns exact beyond float64's 2**53
                whole = int(ts)
                start = whole * 1000 + round((ts - whole) * 1000)
            end = start + round(dur * 1000.0)
            args = e.args if e.args is not None else _NO_ARGS
            kind = gpu_cats.get(cat)
            if kind is not None:
                gs.append(start)
                ge.append(end)
                gd.append(args.device if args.device is not None else _as_int(e.pid))
                gst.append(args.stream if args.stream is not None else _as_int(e.tid))
                gk.append(kind)
                name_id = ids.get(e.name)
                gn.append(sym(e.name) if name_id is None else name_id)
                gc.append(args.correlation if args.correlation is not None else -1)
            elif cat in API_CATS:
                name_id = ids.get(e.name)
                as_.append(start)
                ae.append(end)
                at.append(e.tid if type(e.tid) is int else _as_int(e.tid))
                an.append(sym(e.name) if name_id is None else name_id)
                ac.append(args.correlation if args.correlation is not None else -1)
            elif cat in ANN_CATS or cat == "cpu_op":
                self._annotation(e, cat, start, end)
            elif cat == "cuda_sync":
                self._gsync(e, start, end)
        if any(len(c[k]) >= FLUSH_ROWS for k in _FLUSH_BY):
            self.pack()

    def _note_category(self, cat: str) -> None:
        low = cat.lower()
        if low in KINETO_CATS:
            self.kineto_seen = True
        elif len(self.other_cats) < 64 or low in self.other_cats:
            self.other_cats[low] = self.other_cats.get(low, 0) + 1

    def not_kineto(self, path: Path, header: Header) -> str | None:
        """Why the file is another tool's Chrome-format trace (see ``KINETO_CATS``)."""
        if self.kineto_seen or not self.other_cats or header.schemaVersion is not None \
                or header.distributedInfo or header.deviceProperties is not None \
                or header.baseTimeNanoseconds:
            return None
        top = sorted(self.other_cats.items(), key=lambda kv: -kv[1])[:3]
        cats = ", ".join(f"{c[:40]!r}" for c, _ in top)
        devtools = any("devtools" in c for c in self.other_cats)
        return (f"{path}: not a Kineto trace: {'a Chrome DevTools trace; ' if devtools else ''}"
                f"no torch.profiler header (schemaVersion, distributedInfo) and none of its "
                f"events has a Kineto category (kernel, cuda_runtime, cpu_op...; its own: "
                f"{cats})")

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
        why = self.not_kineto(path, header)
        if why is not None:
            raise TraceError(why)
        base = header.baseTimeNanoseconds or 0
        relative = bool(self.relative)
        dist = header.distributedInfo or {}
        rank, rule = _rank_of(path, dist, file_index)
        if any(self.packed.values()):
            self.pack()
            for k, parts in self.packed.items():
                self.b.cols[k] = np.concatenate(parts) if parts else []  # type: ignore[assignment]  # build() takes arrays too
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


TIME_COLUMNS = tuple(n for n in Timeline._ARRAYS if n.endswith("_ns"))


def _rank_of(path: Path, dist: dict[str, Any], file_index: int) -> tuple[int, str]:
    r = dist.get("rank")
    if isinstance(r, int) and not isinstance(r, bool) and 0 <= r < 2**31:
        return r, "distributedInfo.rank"
    bad = "" if r is None else f"distributedInfo.rank {str(r)[:40]!r} is not a rank; "
    m = RANK_IN_NAME.search(path.name)
    if m:
        return int(m.group(1)), f"rank in file name ({bad}{path.name})" if bad else \
            "rank in file name"
    why = bad or "no distributedInfo.rank, "
    return file_index, f"file order ({why}no rank in the file name)"


def read_kineto(path: str | Path, file_index: int = 0, steps: StepRule = DEFAULT_STEPS,
                max_bytes: int | None = None) -> Timeline:
    """Read one Kineto trace file into a Timeline; raises TraceError with a one-line reason.

    ``steps``: which host ranges are steps (``steps.rule``; default ``ProfilerStep#N``, else
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

