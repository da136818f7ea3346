"""Decoding Kineto Chrome-trace bytes into typed events (the fast path and the tolerant one).

Fast path: msgspec decodes straight into small typed structs, keeping only the fields the
analysis needs. Tolerant path: when the fast path rejects the file (a field of an
unexpected type, bad UTF-8, a truncated file), events are decoded one by one; bad ones are
skipped and counted, and a cut-short file is read up to its last complete event.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from pathlib import Path
from typing import Annotated, Any

import msgspec

from ...errors import TraceError

BAD_UTF8 = "bad UTF-8 in name"

Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class Args(msgspec.Struct, gc=False):
    correlation: Int64 | None = None
    stream: Int64 | None = None
    device: Int64 | None = None
    cuda_sync_kind: str | None = None
    wait_on_stream: Int64 | None = None
    wait_on_cuda_event_record_corr_id: Int64 | None = None
    # record_param_comms (commops.param_comms); Any: never a reason to leave the fast path
    collective_name: Any = msgspec.field(default=None, name="Collective name")
    group_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")
    comm_rank: Any = msgspec.field(default=None, name="Rank")
    src_rank: Any = msgspec.field(default=None, name="Src Rank")
    dst_rank: Any = msgspec.field(default=None, name="Dst Rank")
    seq: Any = msgspec.field(default=None, name="Seq")
    group_size: Any = msgspec.field(default=None, name="Group size")
    rank_start: Any = msgspec.field(default=None, name="Global rank start")
    rank_stride: Any = msgspec.field(default=None, name="Global rank stride")


class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: Int64 | str = -1
    tid: Int64 | str = -1
    ts: float | None = None
    dur: float | None = None
    args: Args | None = None


class Header(msgspec.Struct):
    distributedInfo: dict[str, Any] | None = None
    deviceProperties: list[Any] | None = None
    baseTimeNanoseconds: int | None = None
    schemaVersion: Any = None


class Trace(Header):
    traceEvents: list[Event] = []


_TRACE_DECODER = msgspec.json.Decoder(Trace)
_EVENTS_DECODER = msgspec.json.Decoder(list[Event])
_ANY_DECODER = msgspec.json.Decoder()


# ---------------------------------------------------------------------------- bytes
def read_bytes(path: Path) -> tuple[bytes, str | None]:
    """The file's (uncompressed) bytes, and a note when a ``.gz`` was cut short."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not raw:
        raise TraceError(f"{path}: empty file")
    if raw[:2] != b"\x1f\x8b":
        return raw, None
    try:
        return gzip.decompress(raw), None
    except (EOFError, zlib.error, OSError):
        pass
    # A partial .gz (rank killed while writing): keep whatever inflates.
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        data = d.decompress(raw)
    except zlib.error as exc:
        raise TraceError(f"{path}: corrupt gzip ({exc})") from None
    if not data:
        raise TraceError(f"{path}: corrupt gzip (nothing could be inflated)")
    return data, f"gzip stream cut short after {len(raw)} compressed bytes"


# ---------------------------------------------------------------------------- decode
Skipped = dict[str, int]  # reason -> events


def _decode(path: Path, data: bytes) -> tuple[Header, list[Event], list[str], Skipped]:
    """Decode a trace; returns (header, events, warnings, events skipped by reason)."""
    stripped = data.lstrip()
    if not stripped.startswith(b"{"):
        raise TraceError(f"{path}: not a Kineto trace (not a JSON object)")
    try:
        t = _TRACE_DECODER.decode(data)
        if not t.traceEvents and b'"traceEvents"' not in data:
            _no_trace_events(path, data)
        return t, t.traceEvents, [], {}
    except TraceError:
        raise
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        pass
    return _decode_tolerant(path, data)


def _events_span(data: bytes) -> tuple[int, int]:
    """Byte offsets of the traceEvents array's '[' and of the header's end."""
    key = data.find(b'"traceEvents"')
    if key < 0:
        return -1, -1
    lb = data.find(b"[", key)
    return lb, key


def _decode_tolerant(path: Path, data: bytes) -> tuple[Header, list[Event], list[str], Skipped]:
    warnings: list[str] = []
    lb, key = _events_span(data)
    if lb < 0:
        _no_trace_events(path, data)
    try:
        data.decode("utf-8")
        bad_utf8 = False
    except UnicodeDecodeError:  # invalid bytes become U+FFFD; those events are skipped
        data = data.decode("utf-8", errors="replace").encode()
        lb, key = _events_span(data)
        bad_utf8 = True
    body_end = _array_end(data, lb)
    truncated = body_end < 0
    header = _decode_header(data, key, body_end)
    if truncated:
        cut = _last_complete_event(data, lb)
        if cut < 0:
            raise TraceError(f"{path}: truncated before the first complete event")
        warnings.append(f"truncated at byte {len(data)}")
        body = data[lb:cut + 1] + b"]"
    else:
        body = data[lb:body_end + 1]
    events, bad = _decode_events_one_by_one(body)
    skipped = {"undecodable event": bad} if bad else {}
    if bad_utf8:
        n = len(events)
        events = [e for e in events if "\ufffd" not in e.name and "\ufffd" not in e.cat]
        if n - len(events):
            skipped[BAD_UTF8] = n - len(events)
    if truncated:
        warnings[-1] += f"; {len(events)} events recovered"
    return header, events, warnings, skipped


def _no_trace_events(path: Path, data: bytes) -> None:
    if b'"nodes"' in data and b'"schema"' in data:
        raise TraceError(f"{path}: a PyTorch execution trace (schema/nodes), not a Kineto "
                         "trace (profplug reads torch.profiler's Chrome trace)")
    raise TraceError(f"{path}: not a Kineto trace (no traceEvents)")


def _big_int(s: str) -> int | float:
    """A JSON integer; one too long for int64 becomes +-inf (skipped later as absurd)."""
    if len(s.lstrip("-")) <= 19:
        return int(s)
    return -math.inf if s.startswith("-") else math.inf


def _decode_any(b: bytes) -> Any:
    """Generic JSON decode; numbers out of range (1e400, 10**40) become +-inf, not errors."""
    try:
        return _ANY_DECODER.decode(b)
    except msgspec.ValidationError:  # msgspec's "Number out of range"
        pass
    try:
        return json.loads(b, parse_int=_big_int)
    except (ValueError, RecursionError) as exc:
        raise msgspec.DecodeError(str(exc)) from None


def _decode_header(data: bytes, key: int, body_end: int) -> Header:
    """The fields around traceEvents: before it, and after it unless the file is cut short
    (torch writes distributedInfo first and baseTimeNanoseconds last)."""
    fields: dict[str, Any] = {}
    parts = [data[:key].rstrip().rstrip(b",") + b"}"]
    if body_end >= 0:
        parts.append(b"{" + data[body_end + 1:].lstrip().lstrip(b","))
    for part in parts:
        try:
            d = _decode_any(part)
        except (msgspec.DecodeError, UnicodeDecodeError):
            continue
        if isinstance(d, dict):
            fields.update(d)
    try:
        return msgspec.convert({k: v for k, v in fields.items() if k in Header.__struct_fields__},
                               Header)
    except (msgspec.ValidationError, TypeError):
        return Header()


def _array_end(data: bytes, lb: int) -> int:
    """Offset of the ']' closing the array at ``lb``, or -1 when the file was cut short."""
    tail = data.rstrip()
    if not tail.endswith(b"}"):
        return -1
    # The array closes before the trailing fields (traceName, baseTimeNanoseconds...).
    rb = data.rfind(b"]")
    while rb > lb:
        try:
            _decode_any(data[lb:rb + 1])
            return rb
        except (msgspec.DecodeError, UnicodeDecodeError):
            rb = data.rfind(b"]", lb, rb)
        if rb < 0:
            break
    return -1


def _last_complete_event(data: bytes, lb: int, tries: int = 200) -> int:
    """Offset of the '}' ending the last complete event of a cut-short array, or -1."""
    end = len(data)
    for _ in range(tries):
        pos = data.rfind(b"}", lb, end)
        if pos < 0:
            return -1
        try:
            _decode_any(data[lb:pos + 1] + b"]")
            return pos
        except (msgspec.DecodeError, UnicodeDecodeError):
            end = pos
    return -1


def _decode_events_one_by_one(body: bytes) -> tuple[list[Event], int]:
    """Decode a JSON array of events, skipping (and counting) the ones that do not fit."""
    text = body.decode("utf-8", errors="replace").encode()
    try:
        return _EVENTS_DECODER.decode(text), 0
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    raw = _decode_any(text)
    events: list[Event] = []
    bad = 0
    for item in raw:
        try:
            events.append(msgspec.convert(item, Event))
        except (msgspec.ValidationError, TypeError):
            ev = _salvage(item)
            if ev is None:
                bad += 1
            else:
                events.append(ev)
    return events, bad


def _salvage(item: Any) -> Event | None:
    """Keep an event whose args hold an odd field (e.g. a huge integer) if its core fits."""
    if not isinstance(item, dict):
        return None
    core = {k: item[k] for k in ("ph", "cat", "name", "pid", "tid", "ts", "dur") if k in item}
    try:
        ev = msgspec.convert(core, Event)
    except (msgspec.ValidationError, TypeError):
        return None
    args = item.get("args")
    if isinstance(args, dict):
        clean = {k: v for k, v in args.items()
                 if k in Args.__struct_fields__ and (v is None or isinstance(v, int | str))
                 and not (isinstance(v, int) and abs(v) >= 2**63)}
        try:
            ev.args = msgspec.convert(clean, Args)
        except (msgspec.ValidationError, TypeError):
            ev.args = None
    return ev


# ---------------------------------------------------------------------------- build
