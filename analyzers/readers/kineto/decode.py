"""Decoding Kineto Chrome-trace bytes into typed events (the fast path and the tolerant one).

Fast path: msgspec decodes an array of events straight into small typed structs, keeping
only the fields the analysis needs. Tolerant path: when a piece of the array is rejected
(a bad token, bad UTF-8, a field of an unexpected type), its items are decoded one by one
(``decode_item``); a bad one is skipped with a reason and counted, the others are kept.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Annotated, Any, cast

import msgspec

BAD_UTF8 = "bad UTF-8 in name"

Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class Args(msgspec.Struct, gc=False):
    correlation: Int64 | None = None
    stream: Int64 | None = None
    device: Int64 | None = None
    cuda_sync_kind: str | None = None
    wait_on_stream: Int64 | None = None
    wait_on_cuda_event_record_corr_id: Int64 | None = None
    wait_on_cuda_event_id: Int64 | None = None  # the CUDA event's id (kineto.waitlinks)
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


class ExactEvent(Event, gc=False):
    """An event whose ``ts`` is kept exact: epoch microseconds with nanosecond decimals
    (``1764000000001000.250``) are beyond float64 (0.25 us apart at 1.76e15)."""

    ts: Decimal | None = None  # type: ignore[assignment]  # narrows Event.ts: a float there


class Header(msgspec.Struct):
    distributedInfo: dict[str, Any] | None = None
    deviceProperties: list[Any] | None = None
    baseTimeNanoseconds: int | None = None
    schemaVersion: Any = None


_EVENTS_DECODER = msgspec.json.Decoder(list[Event])
_EXACT_EVENTS_DECODER = msgspec.json.Decoder(list[ExactEvent])
# an epoch-us ts (16+ digits) with a fraction, or as many digits with an exponent
# (1.764000000001000250e15): float64 would lose its nanoseconds
EPOCH_FRACTION = re.compile(rb'"ts"\s*:\s*(?:\d{16,}\.\d|\d\.\d{15,}[eE])')
_ANY_DECODER = msgspec.json.Decoder()


# Reasons an event is skipped (counted in Timeline.skipped).
INVALID_JSON = "invalid JSON"
NESTED = "nested too deep"
UNDECODABLE = "undecodable event"
TOO_BIG = "event larger than 64 MiB"
DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError,
                 RecursionError)
_EVENT_DECODER = msgspec.json.Decoder(Event)
_EXACT_EVENT_DECODER = msgspec.json.Decoder(ExactEvent)
_SURROGATE = re.compile("[\ud800-\udfff]")


def decode_events(piece: bytes | memoryview, exact: bool = False) -> list[Event]:
    """A JSON array of events, typed (the fast path); raises one of DECODE_ERRORS.
    ``exact``: ``ts`` as a Decimal (:class:`ExactEvent`)."""
    if exact:  # an ExactEvent is an Event; the caller only reads the list
        return cast(list[Event], _EXACT_EVENTS_DECODER.decode(piece))
    return _EVENTS_DECODER.decode(piece)


def decode_item(text: bytes | memoryview, exact: bool = False
                ) -> tuple[Event | None, str | None]:
    """One array item -> (event, None), or (None, why it is skipped).

    Typed decode first; then, for an item the typed decoder rejects, a tolerant one: numbers
    out of range become +-inf (skipped later as absurd), odd ``args`` fields are dropped,
    invalid UTF-8 becomes U+FFFD. An event whose name or category is not valid Unicode
    (invalid UTF-8, a lone surrogate escape) is skipped; NaN / Infinity are invalid JSON.
    """
    try:
        return (_EXACT_EVENT_DECODER if exact else _EVENT_DECODER).decode(text), None
    except RecursionError:
        return None, NESTED
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    data = bytes(text)
    bad_utf8 = False
    try:
        raw = _decode_any(data)
    except UnicodeDecodeError:
        bad_utf8 = True
        try:
            raw = _decode_any(data.decode("utf-8", errors="replace").encode())
        except (ValueError, RecursionError):
            return None, INVALID_JSON
    except RecursionError:
        return None, NESTED
    except ValueError:
        return None, INVALID_JSON
    if not isinstance(raw, dict):
        return None, UNDECODABLE
    try:
        ev: Event | None = msgspec.convert(raw, Event)
    except (ValueError, TypeError):  # ValidationError; UnicodeEncodeError (a surrogate key)
        ev, why = _salvage(raw)
        if why is not None:
            return None, why
    if ev is None:
        return None, UNDECODABLE
    if (bad_utf8 and ("\ufffd" in ev.name or "\ufffd" in ev.cat)) \
            or _SURROGATE.search(ev.name) or _SURROGATE.search(ev.cat):
        return None, BAD_UTF8
    return ev, None


def _big_int(s: str) -> int | float:
    """A JSON integer; one too long for int64 becomes +-inf (skipped later as absurd)."""
    if len(s.lstrip("-")) <= 19:
        return int(s)
    return -math.inf if s.startswith("-") else math.inf


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _decode_any(b: bytes | memoryview) -> Any:
    """Generic JSON decode; numbers out of range (1e400, 10**40) become +-inf, not errors.

    Raises ValueError (invalid JSON, NaN/Infinity, UnicodeDecodeError) or RecursionError.
    """
    try:
        return _ANY_DECODER.decode(b)
    except (msgspec.ValidationError, msgspec.DecodeError):  # out of range, a lone surrogate...
        pass
    return json.loads(bytes(b), parse_int=_big_int, parse_constant=_no_constants)


_ARG_KEYS = frozenset(Args.__struct_encode_fields__)  # as the JSON names them
# the integer args: an integer-valued string ("0", "7": some exporters write them so) is read
# as its integer, not a reason to lose the event's other args (its correlation above all)
INT_ARGS = frozenset({"correlation", "stream", "device", "wait_on_stream",
                      "wait_on_cuda_event_record_corr_id"})
_INT_TEXT = re.compile(r"\s*[+-]?[0-9]{1,19}\s*\Z")
BAD_CORRELATION = "args.correlation not an int64"


def _int_arg(v: Any) -> int | None:
    """An integer arg as an int64: an int, an integral float (7.0) or an integer-valued
    string; None for anything else."""
    if isinstance(v, bool):
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    elif isinstance(v, str) and _INT_TEXT.match(v):
        v = int(v)
    if isinstance(v, int) and -(2**63) <= v < 2**63:
        return v
    return None


def _salvage(item: Any) -> tuple[Event | None, str | None]:
    """Keep an event whose args hold an odd field (e.g. a huge integer) if its core fits;
    integer args given as strings are read as integers. An event whose correlation is
    present but not an int64 is skipped with a reason (never kept without it: its launch
    would lose its GPU op)."""
    if not isinstance(item, dict):
        return None, None
    core = {k: item[k] for k in ("ph", "cat", "name", "pid", "tid", "ts", "dur") if k in item}
    try:
        ev = msgspec.convert(core, Event)
    except (ValueError, TypeError):
        return None, None
    args = item.get("args")
    if isinstance(args, dict):
        clean: dict[str, Any] = {}
        for k, v in args.items():
            if k not in _ARG_KEYS or v is None:
                continue
            if k in INT_ARGS:
                n = _int_arg(v)
                if n is None and k == "correlation":
                    return None, BAD_CORRELATION
                if n is not None:
                    clean[k] = n
            elif isinstance(v, int | str) and not (isinstance(v, int) and abs(v) >= 2**63):
                clean[k] = v
        try:
            ev.args = msgspec.convert(clean, Args)
        except (ValueError, TypeError):
            ev.args = None
    return ev, None
