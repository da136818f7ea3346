"""Fuzz the Kineto reader with mutated traces: a Timeline or a TraceError, nothing else;
and a Timeline goes through the default report (what-if and cross-rank included, every
format) without an optional analysis failing (``default_report``).

Mutations: cut, flipped bytes, random inserted bytes, and hostile tokens at random
positions: bad JSON, lone surrogates, stray brackets, deep nesting, huge integers. Run longer
with ``PROFPLUG_FUZZ_EXAMPLES=3000``.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

from default_report import default_report
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profplug.analyzers.core.errors import TraceError
from profplug.analyzers.readers.kineto.reader import read_kineto
from synth import mixed_trace

SEED = json.dumps(mixed_trace().to_dict(), indent=1).encode()

# Tokens that broke an earlier reader: bad JSON, lone surrogates, brackets that
# unbalance an event, deep nesting, numbers beyond int64 / float range, huge digit strings.
TOKENS = [b"NaN", b"Infinity", b'"\\ud800"', b"\\ud800", b"}", b"]", b"{", b"[", b'"', b"\\",
          b",", b":", b"1e400", b"-" + b"9" * 40, b'"' + b"7" * 5000 + b'"', b"[" * 5000,
          b"{" * 3000 + b"}" * 3000, b"\xff\xfe", b"\x00", b" " * 70_000]
mutation = st.one_of(
    st.tuples(st.just("cut"), st.integers(0, len(SEED))),
    st.tuples(st.just("flip"), st.lists(st.tuples(st.integers(0, len(SEED) - 1),
                                                  st.integers(0, 255)), min_size=1, max_size=8)),
    st.tuples(st.just("insert"), st.tuples(st.integers(0, len(SEED)), st.binary(max_size=16))),
    st.tuples(st.just("insert"), st.tuples(st.integers(0, len(SEED)), st.sampled_from(TOKENS))),
    st.tuples(st.just("tokens"), st.lists(st.tuples(st.integers(0, len(SEED)),
                                                    st.sampled_from(TOKENS)), min_size=2,
                                          max_size=6)),
)


def mutate(data: bytes, m: tuple) -> bytes:
    kind, arg = m
    if kind == "cut":
        return data[:arg]
    if kind == "flip":
        b = bytearray(data)
        for pos, val in arg:
            b[pos] = val
        return bytes(b)
    if kind == "tokens":
        for pos, blob in sorted(arg, reverse=True):
            data = data[:pos] + blob + data[pos:]
        return data
    pos, blob = arg
    return data[:pos] + blob + data[pos:]


@settings(max_examples=int(os.environ.get("PROFPLUG_FUZZ_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=mutation, gz=st.sampled_from(["plain", "gz", "gz-then-mutate"]))
def test_mutated_traces_never_crash(tmp_path: Path, m: tuple, gz: str) -> None:
    if gz == "gz-then-mutate":
        packed = gzip.compress(SEED)
        if m[0] == "flip":
            data = mutate(packed, ("flip", [(p % len(packed), v) for p, v in m[1]]))
        elif m[0] == "cut":
            data = packed[: m[1] % (len(packed) + 1)]
        elif m[0] == "tokens":
            data = mutate(packed, ("tokens", [(p % (len(packed) + 1), b) for p, b in m[1]]))
        else:
            data = mutate(packed, ("insert", (m[1][0] % (len(packed) + 1), m[1][1])))
    else:
        data = mutate(SEED, m)
        if gz == "gz":
            data = gzip.compress(data)
    gz_name = gz != "plain"
    p = tmp_path / ("t.json.gz" if gz_name else "t.json")
    p.write_bytes(data)
    try:
        tl = read_kineto(p)
    except TraceError as exc:
        assert "\n" not in str(exc) and str(p) in str(exc)
        return
    default_report([tl])  # whatever was read must also go through the default report
    # one bad spot costs at most the events around it, not the file
    n_events = tl.n_gpu + tl.api_start_ns.size + tl.ann_start_ns.size + sum(tl.skipped.values())
    if m[0] in ("insert", "tokens") and gz != "gz-then-mutate" and not tl.warnings:
        assert n_events >= len(mixed_trace().events) - 2 * (len(m[1]) if m[0] == "tokens" else 1)
