"""``ab.json`` read as untrusted input: a regular file within a size cap, validated with a
schema before any analysis, so a tampered file gives one line naming the bad field.

The schema (msgspec) types the fields the analysis reads and bounds the numbers: step times
finite and in [1 ns, 1 hour] (a 5e-324 us step made ratios overflow), the stored what-if's
prediction a number, ranks and run indices non-negative, ``rounds`` from 1 to the rounds
the runs can fill (an interrupted A/B may hold fewer), every run's policy among
``policies``, ``device`` (the baseline) among them. Unknown fields are allowed (newer
profplug versions add fields; they are kept as they are), so old and new files read the same.
The document itself is returned untouched, as ``json`` decoded it.
"""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path
from typing import Annotated, Any

import msgspec
from profplug.analyzers.ab.plan import BASELINE
from profplug.analyzers.core.errors import ProfplugError, one_line

MAX_AB_JSON_BYTES = 256 << 20  # far above a large A/B (20 rounds x 3 policies x 8 ranks x
# 1000 steps), far below what would exhaust memory on reading
MAX_ROUNDS = 100_000
MAX_STEP_US = 3.6e9  # one hour
MIN_STEP_US = 1e-3  # one nanosecond: 5e-324 made medians and ratios overflow to inf

Count = Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)]
StepUs = Annotated[float, msgspec.Meta(ge=MIN_STEP_US, le=MAX_STEP_US)]
Predicted = Annotated[float, msgspec.Meta(ge=0, le=MAX_STEP_US)]  # 0: no rank to replay
Finite = Annotated[float, msgspec.Meta(ge=-1e12, le=1e12)]
Status = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]


class RankRecord(msgspec.Struct):
    rank: Count
    status: str | None = None
    clock: str | None = None
    step_us: list[StepUs] | None = None
    host_step_us: list[StepUs] | None = None
    requested_steps: Count | None = None
    timing_error: str | None = None
    step_digests: list[str | None] | None = None
    digest_calls: Count | None = None
    digest_in_window: Count | None = None


class WhatIfRecord(msgspec.Struct):
    """A stored what-if overlay (``overlay.whatif_overlay``): what ab-report sets against the
    measurement again."""

    run: str
    predicted_step_us: Predicted
    recorded_step_us: Predicted
    band_pct: Annotated[float, msgspec.Meta(ge=0, le=1e6)] | None = None
    calibrated_on_us: StepUs | None = None
    predicted_speedup: Finite | None = None
    dropped: str | None = None
    traced: dict[str, Any] | None = None


class RunRecord(msgspec.Struct):
    index: Count
    round: Count
    policy: str
    status: str | None = None
    exit_status: Status | None = None
    reasons: list[str] | None = None
    ranks: list[RankRecord] = []


class AbDoc(msgspec.Struct):
    version: int
    policies: Annotated[list[str], msgspec.Meta(min_length=1, max_length=64)]
    runs: list[RunRecord]
    rounds: Annotated[int, msgspec.Meta(ge=1, le=MAX_ROUNDS)] | None = None
    order: str | None = None
    seed: int | None = None
    skip: Count | None = None
    steps: Count | None = None
    command: list[str] | None = None
    whatif: WhatIfRecord | None = None
    interrupted: bool | None = None
    interrupted_status: Status | None = None
    exit_status: Status | None = None


def read_regular(path: Path, limit: int = MAX_AB_JSON_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (a FIFO, a device such as
    /dev/zero or a link to one, a directory: a one-line error, nothing read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ProfplugError(f"{one_line(path)}: unreadable ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ProfplugError(f"{one_line(path)}: not a regular file")
        if st.st_size > limit:
            raise ProfplugError(f"{one_line(path)}: {st.st_size:,} bytes, over the "
                                f"{limit >> 20} MiB an ab.json may have")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ProfplugError(f"{one_line(path)}: over the {limit >> 20} MiB an ab.json may have")
    return data


def _where(msg: str) -> str:
    """msgspec's ``Expected `int`, got `str` - at `$.runs[0].index``` as ``runs[0].index:
    expected `int`, got `str```."""
    text, sep, at = msg.rpartition(" - at `")
    if not sep:
        return msg
    field = at.rstrip("`").removeprefix("$").lstrip(".") or "the document"
    return f"{field}: {text[:1].lower()}{text[1:]}"


def validate(path: Path, data: bytes) -> dict[str, Any]:
    """The document of ``ab.json`` bytes, checked (one-line ProfplugError naming the bad
    field); unknown fields are kept."""
    try:
        # checked straight from the bytes and dropped before the document is decoded: the
        # two copies of every step time are never alive together
        msgspec.json.decode(data, type=AbDoc)
        doc = msgspec.json.decode(data)
    except RecursionError:
        raise ProfplugError(f"{one_line(path)}: not an ab.json (nested too deep)") from None
    except msgspec.ValidationError as exc:
        if data.lstrip()[:1] != b"{":
            raise ProfplugError(f"{one_line(path)}: not an ab.json (not a JSON object)"
                                ) from None
        raise ProfplugError(f"{one_line(path)}: bad ab.json: {one_line(_where(str(exc)))}"
                            ) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise ProfplugError(f"{one_line(path)}: not JSON ({one_line(exc)})") from None
    if not isinstance(doc, dict):
        raise ProfplugError(f"{one_line(path)}: not an ab.json (not a JSON object)")
    where = _odd_value(doc)
    if where is not None:
        raise ProfplugError(f"{one_line(path)}: bad ab.json: {one_line(where)}")
    _check_counts(path, doc)
    return doc


MAX_DEPTH = 64  # ab.json's own fields nest 5 deep; a deeper value cannot be written back


def _odd_value(doc: Any) -> str | None:
    """Where a value nests deeper than MAX_DEPTH or is a non-finite number (1e400 decodes
    to inf, which JSON cannot hold); None when there is none. Iterative: no recursion."""
    todo: list[tuple[Any, str, int]] = [(doc, "", 0)]
    while todo:
        v, at, depth = todo.pop()
        if depth > MAX_DEPTH:
            return f"{at or 'the document'}: nested deeper than {MAX_DEPTH} levels"
        if isinstance(v, float) and not math.isfinite(v):
            return f"{at}: {v} (not a finite number)"
        if isinstance(v, dict):
            todo.extend((x, f"{at}.{k}" if at else str(k), depth + 1) for k, x in v.items())
        elif isinstance(v, list):  # a list's numbers come from msgspec: finite (1e400 is
            # refused as out of range), so only its containers are walked (a (value, path)
            # pair per step time made the check the slowest part of reading a long A/B)
            todo.extend((x, f"{at}[{i}]", depth + 1) for i, x in enumerate(v)
                        if isinstance(x, (dict, list)))
    return None


def _check_counts(path: Path, doc: dict[str, Any]) -> None:
    """Policies and rounds against the runs that are there."""
    def bad(msg: str) -> ProfplugError:
        return ProfplugError(f"{one_line(path)}: bad ab.json: {one_line(msg)}")

    policies = doc["policies"]
    if BASELINE not in policies:
        raise bad(f"policies: {BASELINE} (the baseline) is not among {policies}")
    if len(set(policies)) != len(policies):
        raise bad(f"policies: a policy appears twice in {policies}")
    runs = doc["runs"]
    for i, r in enumerate(runs):
        # a switched run (--switch-every) is labelled with its block order, "device+event"
        parts = str(r["policy"]).split("+") if r.get("block_order") else [r["policy"]]
        if any(p not in policies for p in parts):
            raise bad(f"runs[{i}].policy: {r['policy']!r} is not among the policies")
    filled = 1 + max((r["round"] for r in runs), default=0)
    rounds = doc.get("rounds")
    if rounds is not None and rounds < filled:
        raise bad(f"rounds: {rounds}, but runs[].round goes up to {filled - 1}")
    # an interrupted A/B may have fewer runs than rounds x policies, a complete one not
    if rounds is not None and rounds > filled and not doc.get("interrupted"):
        raise bad(f"rounds: {rounds}, but the runs fill only {filled} (and the A/B was not "
                  "interrupted)")
