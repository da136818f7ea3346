"""Kineto (torch.profiler) Chrome-trace reader: ``.json`` / ``.json.gz`` -> :class:`Timeline`.

Events stream through in chunks (``jsonchunks``) and become timeline rows chunk by chunk;
anything unexpected falls back to decoding the whole file (``kineto_decode``: the typed fast
path, else the tolerant path that skips and counts bad events and recovers cut-short files).

Times: Kineto's ``ts``/``dur`` are microseconds (3 decimals = ns). Recent torch writes
``ts`` relative to ``baseTimeNanoseconds``; older torch wrote integer epoch microseconds.
Both become absolute int64 nanoseconds.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from .. import commops
from ..steprule import DEFAULT_STEPS, StepRule, apply_steps
from ..timeline import (
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
from .jsonchunks import NotStreamable, event_chunks
from .kineto_decode import (  # noqa: F401 (_decode_tolerant, read_bytes: re-exported)
    _ANY_DECODER,
    _EVENTS_DECODER,
    BAD_UTF8,
    Event,
    Header,
    Skipped,
    _decode,
    _decode_tolerant,
    read_bytes,
)

MAX_EVENT_DUR_US = 3.6e9  # one hour: longer events are CUPTI timestamp garbage
EPOCH_US_THRESHOLD = 1e14  # ts above this is epoch microseconds, not relative to a base
MAX_EPOCH_TS_US = 9.0e15  # epoch ts (us) beyond this overflows int64 ns

GPU_CATS = {"kernel": KIND_KERNEL, "gpu_memcpy": KIND_MEMCPY, "gpu_memset": KIND_MEMSET}
API_CATS = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver", "runtime",
                      "driver"})
ANN_CATS = frozenset({"user_annotation"})
SYNC_KINDS = {"Event Sync": SYNC_EVENT_SYNC, "Stream Wait Event": SYNC_STREAM_WAIT_EVENT,
              "Stream Sync": SYNC_STREAM_SYNC, "Context Sync": SYNC_CONTEXT_SYNC}
PARAM_COMMS = "record_param_comms"  # torch's cpu_op describing a NCCL call (commops)
RANK_IN_NAME = re.compile(r"rank[_\-.]?(\d+)", re.IGNORECASE)


def _as_int(x: int | str, default: int = -1) -> int:
    if isinstance(x, int):
        return x
    m = re.search(r"-?\d+", x)
    return int(m.group()) if m else default


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

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def feed(self, events: list[Event]) -> None:
        b = self.b
        if self.relative is None:
            first_ts = next((e.ts for e in events if e.ts is not None and e.ph == "X"), None)
            if first_ts is None:
                return
            self.relative = first_ts < EPOCH_US_THRESHOLD
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
                continue
            ts, dur = e.ts, e.dur
            if ts is None or dur is None:
                self.skip("missing ts/dur")
                continue
            if not 0 <= dur <= MAX_EVENT_DUR_US:  # also NaN
                self.skip("negative or absurd duration")
                continue
            if not (-EPOCH_US_THRESHOLD < ts < EPOCH_US_THRESHOLD if relative
                    else 0 <= ts < MAX_EPOCH_TS_US):  # would overflow int64 ns (or NaN)
                self.skip("timestamp out of range")
                continue
            cat = lower.get(e.cat)
            if cat is None:
                cat = lower[e.cat] = e.cat.lower()
            if cat == "cpu_op" and not (e.name.startswith("ProfilerStep#")
                                        or e.name == PARAM_COMMS):
                continue  # the most common event; only steps and comm params matter
            if relative:
                start = round(ts * 1000.0)
            else:  # epoch us: keep ns exact beyond float64's 2**53
                whole = int(ts)
                start = whole * 1000 + round((ts - whole) * 1000.0)
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

    def finish(self, path: Path, header: Header, file_index: int,
               steps: StepRule = DEFAULT_STEPS) -> Timeline:
        base = header.baseTimeNanoseconds or 0
        relative = bool(self.relative)
        dist = header.distributedInfo or {}
        rank, rule = _rank_of(path, dist, file_index)
        tl = self.b.build(rank=rank, source="kineto", files=[str(path)], rank_rule=rule,
                          has_gpu_sync_records=self.has_sync,
                          metadata={"distributedInfo": dist,
                                    "deviceProperties": header.deviceProperties or [],
                                    "baseTimeNanoseconds": base})
        if relative and base:
            for name in TIME_COLUMNS:
                getattr(tl, name)[...] += base
        apply_steps(tl, steps)
        tl.skipped.update(self.skipped)
        commops.add_annotation_ops(tl)
        if relative and not header.baseTimeNanoseconds:
            tl.warnings.append("no baseTimeNanoseconds: times are relative to this rank's own "
                               "base, not comparable across ranks")
        return tl


TIME_COLUMNS = tuple(n for n in Timeline._ARRAYS if n.endswith("_ns"))


def _to_timeline(path: Path, header: Header, events: list[Event], *, file_index: int,
                 steps: StepRule = DEFAULT_STEPS) -> Timeline:
    rows = _Rows()
    rows.feed(events)
    return rows.finish(path, header, file_index, steps)


def _rank_of(path: Path, dist: dict[str, Any], file_index: int) -> tuple[int, str]:
    r = dist.get("rank")
    if isinstance(r, int) and r >= 0:
        return r, "distributedInfo.rank"
    m = RANK_IN_NAME.search(path.name)
    if m:
        return int(m.group(1)), "rank in file name"
    return file_index, "file order (no distributedInfo.rank, no rank in the file name)"


def read_kineto(path: str | Path, file_index: int = 0, steps: StepRule = DEFAULT_STEPS
                ) -> Timeline:
    """Read one Kineto trace file into a Timeline; raises TraceError with a one-line reason.

    ``steps``: which host ranges are steps (``steprule``; default ``ProfilerStep#N``, else
    ``profplug.step``).

    Well-formed files are streamed in chunks (memory ~ one chunk plus the columns); any
    surprise (truncation, bad UTF-8, odd types, unusual layout) reads the file whole with the
    tolerant decoder instead.
    """
    p = Path(path)
    tl = _read_streaming(p, file_index, steps)
    if tl is not None:
        return tl
    data, gz_note = read_bytes(p)
    header, events, warnings, bad = _decode(p, data)
    del data
    if gz_note:
        warnings.insert(0, gz_note)
    tl = _to_timeline(p, header, events, file_index=file_index, steps=steps)
    tl.warnings[:0] = warnings
    for reason, n in bad.items():
        tl.skip(reason, n)
    return tl


def _read_streaming(path: Path, file_index: int, steps: StepRule = DEFAULT_STEPS
                    ) -> Timeline | None:
    """The fast path: chunk by chunk (see jsonchunks); None when the file needs the slow one."""
    rows = _Rows()
    header: Header | None = None
    try:
        for chunk in event_chunks(path):
            if isinstance(chunk, tuple):
                head, tail = (_ANY_DECODER.decode(c) for c in chunk)
                header = msgspec.convert({**head, **tail}, Header)
            else:
                rows.feed(_EVENTS_DECODER.decode(chunk))
    except (NotStreamable, msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError,
            OSError, TypeError):
        return None
    if header is None:
        return None
    return rows.finish(path, header, file_index, steps)

